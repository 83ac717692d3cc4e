//! One test per finding of the fuzzer that was fixed, each on the input in
//! the corpus (`corpus/<target>/regress-*`) and on a larger one. Each runs on
//! a thread with the target's production stack, so a stack overflow fails
//! the test binary loudly rather than passing.

use std::time::Duration;

use rag_fuzz::driver::run_isolated;
use rag_fuzz::{by_name, corpus_root, Outcome};

fn run(target: &str, input: Vec<u8>) -> Duration {
    let t = by_name(target).unwrap();
    let len = input.len();
    match run_isolated(t, input) {
        (Outcome::Returned { .. }, took) => took,
        (Outcome::Panicked(m), _) => panic!("{target} on {len} bytes: {m}"),
    }
}

fn corpus(target: &str, file: &str) -> Vec<u8> {
    std::fs::read(corpus_root().join(target).join(file)).unwrap()
}

/// Finding: `html_links`, which the URL-source crawler runs in the server
/// process (a tokio worker thread, 2 MiB of stack), walked the page's tree
/// recursively; a 54 KB page of 18,000 nested `<q>` overflowed the stack and
/// aborted the whole server. Fixed in rag-ingest/src/html.rs: `find_all`
/// walks the tree without recursion; since then the crawler also reads
/// links through the extraction worker, not in the server process, and
/// nesting is cut at 512 levels before the tree is built (`html_depth.rs`).
#[test]
fn crawler_links_of_a_deeply_nested_page() {
    run(
        "html_links",
        corpus("html_links", "regress-deep-nesting.html"),
    );
    run("html_links", "<q>".repeat(300_000).into_bytes());
    run(
        "html_links",
        format!("{}<a href=/deep>x</a>", "<span>".repeat(200_000)).into_bytes(),
    );
}

/// Finding: HTML extraction recursed over the tree (`find_all`,
/// `text_lens`, the text walker); 80,000 nested `<q>` (240 KB) overflowed the
/// 8 MiB stack of the extract worker (`parse_crash`). Fixed: the walker,
/// `find_all` and the text lengths are iterative.
#[test]
fn extraction_of_a_deeply_nested_page() {
    run("html", corpus("html", "regress-deep-nesting.html"));
    run("html", "<q>".repeat(300_000).into_bytes());
    let nested_lists = format!("<main>{}deep</main>", "<ul><li>".repeat(3000));
    run("html", nested_lists.into_bytes());
}

/// Finding: HTML extraction was quadratic in the number of nested
/// candidates for the content root (every `<main>`/`role=main`, `<article>`
/// and paragraph had its subtree's text counted again): 20,000 nested
/// `<span role=main>` (320 KB) took 32 s in the test build, over the
/// worker's CPU limit. Fixed: the text lengths of all elements are counted
/// once, in one pass. Now a few milliseconds.
#[test]
fn extraction_is_linear_in_nested_candidates() {
    run("html", corpus("html", "regress-quadratic-main.html"));
    let took = run(
        "html",
        format!("{}x", "<span role=main>".repeat(20_000)).into_bytes(),
    );
    assert!(took < Duration::from_secs(4), "took {took:?} (was 32 s)");
    let took = run(
        "html",
        format!("{}x", "<article><span role=main>".repeat(8_000)).into_bytes(),
    );
    assert!(took < Duration::from_secs(4), "took {took:?}");
}

/// Finding: every chunk copied its section's whole heading path. A Markdown
/// paragraph over a `-` line is a setext heading, so one 256 KB line became a
/// heading copied into each of its ~16,000 chunks: 5.5 GB and 11 s to chunk
/// one upload, in the server process (chunking is not sandboxed). Fixed in
/// rag-ingest/src/chunk.rs: headings in paths are cut to
/// `MAX_HEADING_CHARS` (256) characters.
#[test]
fn a_huge_heading_is_not_copied_into_every_chunk() {
    use rag_ingest::{chunk, extract, ApproxTokenCounter, ChunkParams, Content, Limits};
    run("chunk", corpus("chunk", "regress-huge-heading.bin"));
    let md = format!("{}\n-\n\nBody.\n", "word ".repeat(200_000));
    let x = extract("big.md", None, md.as_bytes(), &Limits::default()).unwrap();
    let Content::Document(doc) = x.content else {
        panic!("not a document")
    };
    let params = ChunkParams {
        target_tokens: 16,
        overlap_tokens: 0,
        min_split_chars: 1,
    };
    let chunks = chunk(&doc, &params, &ApproxTokenCounter).unwrap();
    assert!(chunks.len() > 10_000, "{} chunks", chunks.len());
    let heading_bytes: usize = chunks
        .iter()
        .flat_map(|c| &c.heading_path)
        .map(String::len)
        .sum();
    assert!(
        heading_bytes <= chunks.len() * rag_ingest::MAX_HEADING_CHARS,
        "{heading_bytes} bytes of headings in {} chunks",
        chunks.len()
    );
}
