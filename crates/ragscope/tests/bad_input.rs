//! Bad input gets a clear error and a non-zero exit, never a panic, and loses nothing.

mod common;
use common::*;

#[test]
fn bad_queries_and_files_are_refused_clearly() {
    let dir = demo_data();
    let data = data_of(&dir);
    let query = |q: &str| {
        let mut c = cmd(&data);
        c.args(["query", "--kb", "demo", q]);
        run(c)
    };

    let r = query("");
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("empty"), "{}", r.stderr);
    let r = query("？？？ ...");
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("empty"), "{}", r.stderr);

    let huge = "退款".repeat(100 * 1024 / 6);
    let r = query(&huge);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("limit"), "{}", r.stderr);

    let mut c = cmd(&data);
    c.args(["query", "--kb", "no-such-kb", "hello"]);
    let r = run(c);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("unknown knowledge base"), "{}", r.stderr);

    let mut c = cmd(&data);
    c.args([
        "query",
        "--kb",
        "demo",
        "--lexical-interpolation",
        "7",
        "hello",
    ]);
    let r = run(c);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("lexical_interpolation"), "{}", r.stderr);

    // Binary, unsupported and malformed files fail with a reason and a code; the
    // good files beside them are stored. A Latin-1 file is no longer refused as
    // invalid UTF-8: its encoding is detected (windows-1252) and it is read.
    let files = dir.path().join("inputs");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(
        files.join("a-binary.txt"),
        [0x7f, b'E', b'L', b'F', 0, 0, 1, 2],
    )
    .unwrap();
    std::fs::write(files.join("b-latin1.txt"), b"caf\xe9 au lait").unwrap();
    std::fs::write(
        files.join("c-good.md"),
        "# 新菜单\n\n本周新增酸辣土豆丝。\n",
    )
    .unwrap();
    std::fs::write(files.join("d-program.exe"), b"MZ\x90\x00").unwrap();
    std::fs::write(files.join("e-bad.jsonl"), "{\"question\": \"q\"}\n").unwrap();
    let mut c = cmd(&data);
    c.args(["ingest", "--kb", "demo"]).arg(&files);
    let r = run(c);
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(
        r.stdout
            .contains("a-binary.txt [malformed_file]: malformed text file: binary data"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("d-program.exe [unsupported_format]: unsupported format .exe"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("e-bad.jsonl [bad_record]: line 1"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("3 failed"), "{}", r.stdout);
    // The summary table groups the failures by code.
    assert!(r.stdout.contains("    bad_record (1)\n"), "{}", r.stdout);
    let s = sources(&query_events(&data, "demo", "酸辣土豆丝", &[]));
    assert!(s[0].1.contains("酸辣土豆丝"));
    let s = sources(&query_events(&data, "demo", "café au lait", &[]));
    assert!(s[0].1.contains("café au lait"), "{s:?}");

    // The knowledge base still answers as before.
    let s = sources(&query_events(&data, "demo", "虾", &[]));
    assert!(s[0].0.contains('虾'));

    // Unknown knowledge base for ingest; missing file.
    let mut c = cmd(&data);
    c.args(["ingest", "--kb", "nope"])
        .arg(files.join("c-good.md"));
    assert_eq!(run(c).code, 2);
    let mut c = cmd(&data);
    c.args(["ingest", "--kb", "demo"])
        .arg(files.join("missing.md"));
    assert_eq!(run(c).code, 2);
}

#[test]
fn dense_modes_say_they_are_not_available_yet() {
    let eval = eval_dir().join("scifact");
    let dir = tempfile::tempdir().unwrap();
    let mut c = cmd(&dir.path().join("data"));
    c.args(["eval", "--mode", "dense", "--corpus"])
        .arg(eval.join("corpus.jsonl"))
        .arg("--queries")
        .arg(eval.join("queries.jsonl"))
        .arg("--qrels")
        .arg(eval.join("qrels/test.tsv"));
    let r = run(c);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("embedder"), "{}", r.stderr);

    // The key-less mode is refused off loopback, and a malformed address is a clear error.
    let mut c = cmd(&dir.path().join("data"));
    c.args(["serve", "--open", "--addr", "0.0.0.0:0"]);
    let r = run(c);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("only allowed on a loopback address"),
        "{}",
        r.stderr
    );
    let mut c = cmd(&dir.path().join("data"));
    c.args(["serve", "--addr", "not-an-address"]);
    let r = run(c);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("is not host:port"), "{}", r.stderr);
}

#[test]
fn configuration_layers_and_redaction() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let file = dir.path().join("ragscope.toml");
    std::fs::write(&file, "tenant = \"from-file\"\n[retrieval]\nper_path_k = 33\n[providers]\nllm_api_key = \"sk-file-secret\"\nllm_base_url = \"http://u:pw-secret@llm.local/v1?api_key=qs-secret\"\n").unwrap();

    let mut c = cmd(&data);
    c.arg("--config")
        .arg(&file)
        .arg("check-config")
        .env("RAGSCOPE_RETRIEVAL__PER_PATH_K", "44")
        .env("OPENROUTER_API_KEY", "sk-or-env-secret");
    let r = ok(c);
    assert!(r.stdout.contains("tenant = \"from-file\""), "{}", r.stdout);
    assert!(
        r.stdout.contains("per_path_k = 44"),
        "environment beats file:\n{}",
        r.stdout
    );
    assert!(
        !r.stdout.contains("sk-file-secret")
            && !r.stdout.contains("sk-or-env-secret")
            && !r.stdout.contains("pw-secret")
            && !r.stdout.contains("qs-secret"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("redacted"));

    let mut c = cmd(&data);
    c.arg("--config")
        .arg(&file)
        .args(["--tenant", "from-flag", "check-config"])
        .env("RAGSCOPE_TENANT", "from-env");
    let r = ok(c);
    assert!(
        r.stdout.contains("tenant = \"from-flag\""),
        "flags beat the environment:\n{}",
        r.stdout
    );

    std::fs::write(&file, "[retrieval]\nper_path_k = 0\n").unwrap();
    let mut c = cmd(&data);
    c.arg("--config").arg(&file).arg("check-config");
    let r = run(c);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("per_path_k"), "{}", r.stderr);
}
