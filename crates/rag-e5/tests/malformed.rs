//! Malformed model images must produce a structured error, never a panic.

mod common;

use common::model_bytes;
use rag_e5::{E5Error, E5Model};

/// Byte offsets of the sections of the shipped file, found by walking it.
struct Layout {
    tokenizer: usize,
    norm_map: usize,
    directory: usize,
    /// Offset of the first directory entry's name length.
    first_entry: usize,
    first_tensor_data: usize,
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

fn layout(b: &[u8]) -> Layout {
    let tokenizer = 44;
    let n = u32_at(b, tokenizer) as usize;
    let blob = u64_at(b, tokenizer + 20) as usize;
    let norm_map = tokenizer + 28 + (n + 1) * 4 + n * 4 + blob;
    let norm_bytes = u32_at(b, norm_map + 4) as usize;
    let directory = norm_map + 8 + norm_bytes;
    let first_entry = directory + 4;
    let name_len = u16::from_le_bytes([b[first_entry], b[first_entry + 1]]) as usize;
    let first_tensor_data = u64_at(b, first_entry + 2 + name_len + 1 + 4) as usize;
    Layout {
        tokenizer,
        norm_map,
        directory,
        first_entry,
        first_tensor_data,
    }
}

fn parse(bytes: Vec<u8>) -> Result<E5Model, E5Error> {
    E5Model::from_bytes(bytes)
}

#[test]
fn shipped_file_layout_is_as_expected() {
    let b = model_bytes();
    let l = layout(b);
    assert_eq!(&b[..4], b"E5S1");
    assert_eq!(l.first_tensor_data, 4_638_272);
    assert!(l.norm_map > l.tokenizer && l.directory > l.norm_map);
}

#[test]
fn empty_and_bad_magic() {
    match parse(Vec::new()) {
        Err(E5Error::BadMagic { found }) => assert!(found.is_empty()),
        other => panic!("unexpected {other:?}"),
    }
    match parse(b"E5".to_vec()) {
        Err(E5Error::BadMagic { found }) => assert_eq!(found, b"E5"),
        other => panic!("unexpected {other:?}"),
    }
    let mut b = model_bytes().to_vec();
    b[..4].copy_from_slice(b"GGUF");
    match parse(b) {
        Err(E5Error::BadMagic { found }) => assert_eq!(found, b"GGUF"),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn wrong_version() {
    let mut b = model_bytes().to_vec();
    b[4..8].copy_from_slice(&2u32.to_le_bytes());
    match parse(b) {
        Err(E5Error::UnsupportedVersion {
            found: 2,
            expected: 1,
        }) => {}
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn invalid_header_fields() {
    // hidden = 0
    let mut b = model_bytes()[..64].to_vec();
    b[8..12].copy_from_slice(&0i32.to_le_bytes());
    match parse(b) {
        Err(E5Error::InvalidHeader {
            field: "hidden",
            value: 0,
            ..
        }) => {}
        other => panic!("unexpected {other:?}"),
    }
    // heads that do not divide hidden
    let mut b = model_bytes()[..64].to_vec();
    b[16..20].copy_from_slice(&7i32.to_le_bytes());
    match parse(b) {
        Err(E5Error::InvalidHeader {
            field: "heads",
            value: 7,
            ..
        }) => {}
        other => panic!("unexpected {other:?}"),
    }
    // a quantisation block size other than 32
    let mut b = model_bytes()[..64].to_vec();
    b[40..44].copy_from_slice(&64i32.to_le_bytes());
    match parse(b) {
        Err(E5Error::InvalidHeader {
            field: "qk",
            value: 64,
            ..
        }) => {}
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn truncation_anywhere_reports_offsets() {
    let full = model_bytes();
    let l = layout(full);
    let cuts = [
        5,
        20,
        43,
        l.tokenizer + 10,
        l.tokenizer + 30,
        l.tokenizer + 500_000,
        l.norm_map - 1,
        l.norm_map + 3,
        l.norm_map + 100,
        l.directory + 2,
        l.first_entry + 5,
        l.first_tensor_data - 1,
        l.first_tensor_data + 1000,
        full.len() / 2,
        full.len() - 1,
    ];
    for &cut in &cuts {
        let result = parse(full[..cut].to_vec());
        match result {
            Err(E5Error::Truncated {
                offset,
                needed,
                len,
                what,
            }) => {
                assert_eq!(len, cut, "cut at {cut}");
                assert!(
                    offset + needed > len,
                    "cut at {cut}: {what} at {offset}+{needed}"
                );
            }
            Err(E5Error::TensorOutOfBounds { len, .. }) => assert_eq!(len, cut),
            Err(E5Error::InvalidTokenizer { .. }) if (l.norm_map..l.directory).contains(&cut) => {}
            other => panic!("cut at {cut}: unexpected {other:?}"),
        }
    }
    // The error message names the section and the offsets.
    let msg = parse(full[..l.tokenizer + 30].to_vec())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("truncated") && msg.contains("offset"), "{msg}");
}

#[test]
fn unknown_tensor_name() {
    let mut b = model_bytes().to_vec();
    let l = layout(&b);
    // The first entry is "emb.word"; rename it to "emb.wxrd".
    let name_start = l.first_entry + 2;
    assert_eq!(&b[name_start..name_start + 8], b"emb.word");
    b[name_start + 5] = b'x';
    match parse(b) {
        Err(E5Error::UnknownTensor { name }) => assert_eq!(name, "emb.wxrd"),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn wrong_shape_dtype_and_bounds() {
    let l = layout(model_bytes());
    let entry = l.first_entry + 2 + 8; // after "emb.word"
    let dtype_at = entry;
    let elems_at = entry + 1;
    let offset_at = entry + 5;

    let mut b = model_bytes().to_vec();
    b[elems_at..elems_at + 4].copy_from_slice(&123u32.to_le_bytes());
    match parse(b) {
        Err(E5Error::WrongShape {
            name,
            found_elems: 123,
            ..
        }) => assert_eq!(name, "emb.word"),
        other => panic!("unexpected {other:?}"),
    }

    let mut b = model_bytes().to_vec();
    b[dtype_at] = 0;
    match parse(b) {
        Err(E5Error::WrongDtype {
            name,
            expected: 1,
            found: 0,
        }) => assert_eq!(name, "emb.word"),
        other => panic!("unexpected {other:?}"),
    }

    let mut b = model_bytes().to_vec();
    b[offset_at..offset_at + 8].copy_from_slice(&(u64::MAX - 10).to_le_bytes());
    match parse(b) {
        Err(E5Error::TensorOutOfBounds { name, .. }) => assert_eq!(name, "emb.word"),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn missing_and_duplicate_tensors() {
    let l = layout(model_bytes());
    // Rename "emb.word" to "emb.type": "emb.type" is then listed twice.
    let mut b = model_bytes().to_vec();
    let name_start = l.first_entry + 2;
    b[name_start..name_start + 8].copy_from_slice(b"emb.type");
    match parse(b) {
        Err(E5Error::DuplicateTensor { name }) | Err(E5Error::WrongShape { name, .. }) => {
            assert_eq!(name, "emb.type")
        }
        other => panic!("unexpected {other:?}"),
    }
    // Drop the last directory entry by decrementing the count.
    let mut b = model_bytes().to_vec();
    let count = u32_at(&b, l.directory);
    b[l.directory..l.directory + 4].copy_from_slice(&(count - 1).to_le_bytes());
    match parse(b) {
        Err(E5Error::MissingTensor { name }) => assert_eq!(name, "l11.oln.b"),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn corrupted_metadata_never_panics() {
    // Flip bytes all over the header, tokenizer tables, normalisation map and
    // tensor directory; each image must parse or fail with an error, and a
    // model that still parses must embed without panicking.
    let full = model_bytes();
    let l = layout(full);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let regions = [
        (0, 44),
        (l.tokenizer, l.tokenizer + 28),
        (l.tokenizer + 28, l.norm_map),
        (l.norm_map, l.directory),
        (l.directory, l.first_tensor_data),
    ];
    let mut parsed = 0;
    for i in 0..60 {
        let (lo, hi) = regions[i % regions.len()];
        let mut b = full.to_vec();
        for _ in 0..3 {
            let at = lo + (next() as usize) % (hi - lo);
            b[at] ^= 1 << (next() % 8);
        }
        if let Ok(model) = parse(b) {
            parsed += 1;
            if parsed <= 3 {
                let e = model.embed("a short test 测试", rag_e5::Kind::Query);
                assert_eq!(e.vector.len(), model.dim());
            }
        }
    }
    println!("{parsed} of 60 corrupted images still parsed");
}
