//! Fidelity of every matrix kernel tier this CPU supports against the
//! reference engine's vectors, each tier forced explicitly. A tier the CPU
//! lacks is reported as skipped.

mod common;

use common::{cosine, fixture, model_bytes, Reference};
use rag_e5::{E5Error, E5Model, Kernel, Kind};

/// Min and mean cosine of the tier's vectors against the fixture.
fn fidelity(model: &E5Model, rows: &[Reference]) -> (f32, f64) {
    let mut min = f32::MAX;
    let mut sum = 0.0f64;
    for kind in [Kind::Query, Kind::Passage] {
        let picked: Vec<&Reference> = rows.iter().filter(|r| r.kind == kind).collect();
        let texts: Vec<&str> = picked.iter().map(|r| r.text.as_str()).collect();
        for (row, e) in picked
            .iter()
            .zip(model.embed_many_parallel(&texts, kind, 2))
        {
            assert_eq!(e.tokens, row.tokens);
            let c = cosine(&e.vector, &row.vector);
            min = min.min(c);
            sum += f64::from(c);
        }
    }
    (min, sum / rows.len() as f64)
}

/// Loads the model on `kernel`, or reports the tier as skipped.
fn model_on(kernel: Kernel) -> Option<E5Model> {
    match E5Model::from_bytes_with_kernel(model_bytes().to_vec(), kernel) {
        Ok(model) => {
            assert_eq!(model.kernel(), kernel);
            Some(model)
        }
        Err(E5Error::KernelUnsupported { kernel: k }) => {
            assert_eq!(k, kernel);
            assert!(!kernel.is_supported());
            eprintln!("SKIPPED: the {kernel} tier is not supported on this CPU");
            None
        }
        Err(e) => panic!("the model does not load: {e}"),
    }
}

fn check_fidelity(kernel: Kernel, min_cosine: f32, mean_cosine: f64) {
    let Some(model) = model_on(kernel) else {
        return;
    };
    let rows = fixture();
    let (min, mean) = fidelity(&model, &rows);
    println!(
        "tier {kernel}: cosine vs reference over {} texts: min {min:.6}, mean {mean:.6}",
        rows.len()
    );
    assert!(min >= min_cosine, "{kernel}: min cosine {min}");
    assert!(mean >= mean_cosine, "{kernel}: mean cosine {mean}");
}

#[test]
fn amx_tier_matches_reference_vectors() {
    check_fidelity(Kernel::Amx, 0.999, 0.9995);
}

#[test]
fn avx512_tier_matches_reference_vectors() {
    check_fidelity(Kernel::Avx512, 0.999, 0.9995);
}

#[test]
fn avx2_tier_matches_reference_vectors() {
    check_fidelity(Kernel::Avx2, 0.9995, 0.9999);
}

#[test]
fn portable_tier_matches_reference_vectors() {
    check_fidelity(Kernel::Portable, 0.9995, 0.9999);
}

#[test]
fn auto_selects_the_best_tier_and_tiers_switch_in_place() {
    let best = Kernel::best();
    let mut model = E5Model::from_bytes(model_bytes().to_vec()).expect("the model parses");
    assert_eq!(model.kernel(), best);
    println!("this CPU runs the {best} tier");
    let text = "how much protein should a female eat per day";
    let first = model.embed(text, Kind::Query);
    for kernel in Kernel::TIERS {
        let before = model.kernel();
        match model.set_kernel(kernel) {
            Ok(k) => {
                assert_eq!((k, model.kernel()), (kernel, kernel));
                let e = model.embed(text, Kind::Query);
                assert!(rag_e5::dot(&e.vector, &first.vector) > 0.999, "{kernel}");
            }
            Err(E5Error::KernelUnsupported { .. }) => {
                eprintln!("SKIPPED: the {kernel} tier is not supported on this CPU");
                assert_eq!(
                    model.kernel(),
                    before,
                    "a refused tier keeps the current one"
                );
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(model.set_kernel(Kernel::Auto).ok(), Some(best));
    assert_eq!(model.embed(text, Kind::Query), first);
}

#[test]
fn every_tier_gives_the_same_vector_alone_and_in_a_batch() {
    let texts = [
        "short",
        "一个中文句子",
        "a somewhat longer English sentence about retrieval, with more tokens than a tile",
    ];
    for kernel in Kernel::TIERS {
        let Some(model) = model_on(kernel) else {
            continue;
        };
        let batched = model.embed_many(&texts, Kind::Passage);
        for (t, b) in texts.iter().zip(&batched) {
            assert_eq!(&model.embed(t, Kind::Passage), b, "{kernel}");
        }
    }
}
