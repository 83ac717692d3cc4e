//! Hugging Face BERT-family sentence-embedding models in pure, safe Rust.
