//! Every file of the seed corpus, regression inputs included, runs through
//! its target without a panic; the generated seeds are those in the
//! repository.

use rag_fuzz::driver::run_isolated;
use rag_fuzz::{corpus_root, driver, seeds, Outcome, TARGETS};

#[test]
fn every_corpus_file_runs_cleanly() {
    let mut bad = Vec::new();
    for t in TARGETS {
        let files = driver::load_corpus(&corpus_root().join(t.name))
            .unwrap_or_else(|e| panic!("corpus of {}: {e}", t.name));
        assert!(!files.is_empty(), "no seeds for {}", t.name);
        for (name, bytes) in files {
            if let (Outcome::Panicked(m), _) = run_isolated(t, bytes) {
                bad.push(format!("{}/{name}: {m}", t.name));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn generated_seeds_are_in_the_repository() {
    for s in seeds::all() {
        let path = corpus_root().join(s.target).join(&s.name);
        let on_disk = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run `cargo run -p rag-fuzz -- gen-corpus`)",
                path.display()
            )
        });
        assert!(
            on_disk == s.bytes,
            "{} differs from the generator (run `cargo run -p rag-fuzz -- gen-corpus`)",
            path.display()
        );
    }
}

/// The seeds reach the parsers' deep paths: the documents among them are
/// read as documents with text, not refused at the door.
#[test]
fn seeds_are_read_as_documents() {
    use rag_ingest::{extract, Content, Limits};
    let read = |target: &str, file: &str, name: &str| {
        let bytes = std::fs::read(corpus_root().join(target).join(file)).unwrap();
        let bytes = if target == "docx" && !bytes.starts_with(b"PK") {
            rag_fuzz::targets::docx::pack(&bytes)
        } else if file == "flate-no-xref.pdf" {
            // Only readable once the target rebuilds its xref table.
            rag_fuzz::targets::pdf::rebuild_xref(&bytes).unwrap()
        } else {
            bytes
        };
        match extract(name, None, &bytes, &Limits::default()) {
            Ok(x) => match x.content {
                Content::Document(d) => d.text,
                Content::Faqs { rows, .. } => format!("{} rows", rows.len()),
            },
            Err(e) => format!("ERROR {e}"),
        }
    };
    for (t, f, n) in [
        ("pdf", "hello.pdf", "a.pdf"),
        ("pdf", "two-pages.pdf", "a.pdf"),
        ("pdf", "xobject.pdf", "a.pdf"),
        ("pdf", "flate-no-xref.pdf", "a.pdf"),
        ("pdf", "tounicode.pdf", "a.pdf"),
        ("pdf", "outlines.pdf", "a.pdf"),
        ("pdf", "objstm.pdf", "a.pdf"),
        ("docx", "parts-basic.xml", "a.docx"),
        ("docx", "parts-styles.xml", "a.docx"),
        ("docx", "raw-basic.docx", "a.docx"),
        ("docx", "raw-bomb.docx", "a.docx"),
        ("html", "article.html", "a.html"),
        ("html", "gbk.html", "a.html"),
        ("faq_csv", "full.csv", "a.csv"),
        ("faq_csv", "gbk.csv", "a.csv"),
        ("faq_jsonl", "full.jsonl", "a.jsonl"),
    ] {
        let text = read(t, f, n);
        assert!(
            !text.starts_with("ERROR") && !text.is_empty(),
            "{t}/{f}: {text}"
        );
    }
}
