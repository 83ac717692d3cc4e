//! Question feedback for FAQ matching, on the dense path.
//!
//! When a question is being matched against FAQ questions (most of the
//! dense path's best candidates are FAQ entries), two things help on both
//! FAQ development sets (banking77 dev and bq dev; see docs/quality.md):
//!
//! - the question embedded both ways, as a query and as a passage (e5 reads
//!   `query: ` and `passage: ` texts differently; the FAQ entries were
//!   embedded as passages), and the two vectors averaged;
//! - pseudo-relevance feedback (Rocchio): the averaged vector moved towards
//!   the entries it finds first, since the paraphrases of one question
//!   cluster around each other.
//!
//! Document passages are never touched: the rule only runs for FAQ matching.

use rag_core::{Hit, PassageId};

/// The dense path's best candidates looked at, and the share of them that
/// must be FAQ entries, for the question to count as FAQ matching.
pub(crate) const FAQ_LOOK: usize = 10;
pub(crate) const FAQ_SHARE: f64 = 0.8;

/// Entries whose vectors the question moves towards.
pub(crate) const FEEDBACK_ENTRIES: usize = 2;
/// Weight of the mean of those entries' vectors against the (unit)
/// question vector.
pub(crate) const FEEDBACK_WEIGHT: f32 = 0.5;

/// How many of the best [`FAQ_LOOK`] hits are FAQ entries, when at least
/// [`FAQ_SHARE`] of them are (a question matched against FAQ questions).
pub(crate) fn faq_matching(hits: &[Hit]) -> Option<usize> {
    let top = &hits[..hits.len().min(FAQ_LOOK)];
    let faqs = top
        .iter()
        .filter(|h| matches!(h.id, PassageId::Faq(_)))
        .count();
    (!top.is_empty() && faqs as f64 >= FAQ_SHARE * top.len() as f64).then_some(faqs)
}

/// The unit mean of the question's query and passage vectors (each made
/// unit first).
pub(crate) fn both_forms(query_form: &[f32], passage_form: &[f32]) -> Vec<f32> {
    let (q, p) = (unit(query_form.to_vec()), unit(passage_form.to_vec()));
    unit(q.iter().zip(&p).map(|(a, b)| a + b).collect())
}

/// `question` (made unit) plus [`FEEDBACK_WEIGHT`] times the mean of
/// `neighbours` (each made unit), made unit. Without neighbours, the unit
/// question.
pub(crate) fn moved_towards(question: &[f32], neighbours: &[&[f32]]) -> Vec<f32> {
    let mut out = unit(question.to_vec());
    if !neighbours.is_empty() {
        let w = FEEDBACK_WEIGHT / neighbours.len() as f32;
        for n in neighbours {
            let n = unit(n.to_vec());
            for (o, x) in out.iter_mut().zip(&n) {
                *o += w * x;
            }
        }
    }
    unit(out)
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

/// `v` divided by its length; a zero vector stays zero.
fn unit(mut v: Vec<f32>) -> Vec<f32> {
    let n = norm(&v);
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use rag_core::{ChunkId, FaqId};

    fn hit(id: PassageId) -> Hit {
        Hit {
            id,
            rank: 1,
            score: 1.0,
            matched: vec![],
        }
    }

    fn faq() -> PassageId {
        PassageId::Faq(FaqId::generate())
    }

    fn chunk() -> PassageId {
        PassageId::Chunk(ChunkId::generate())
    }

    #[test]
    fn faq_matching_needs_most_of_the_best_ten() {
        let eight: Vec<Hit> = (0..8)
            .map(|_| hit(faq()))
            .chain((0..2).map(|_| hit(chunk())))
            .chain((0..20).map(|_| hit(chunk())))
            .collect();
        assert_eq!(faq_matching(&eight), Some(8));
        let seven: Vec<Hit> = (0..7)
            .map(|_| hit(faq()))
            .chain((0..3).map(|_| hit(chunk())))
            .collect();
        assert_eq!(faq_matching(&seven), None);
        assert_eq!(faq_matching(&[]), None);
        assert_eq!(faq_matching(&[hit(faq())]), Some(1));
    }

    fn cos(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>() / (norm(a) * norm(b))
    }

    #[test]
    fn both_forms_is_the_unit_bisector() {
        let q = [3.0, 0.0, 0.0];
        let p = [0.0, 0.5, 0.0];
        let m = both_forms(&q, &p);
        assert!((norm(&m) - 1.0).abs() < 1e-6);
        assert!((cos(&m, &q) - cos(&m, &p)).abs() < 1e-6);
        assert!((m[0] - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
    }

    #[test]
    fn feedback_moves_towards_the_neighbours_and_never_past_them() {
        let q = [1.0, 0.0, 0.0];
        let n1 = [0.0, 2.0, 0.0];
        let n2 = [0.0, 0.0, 1.0];
        let moved = moved_towards(&q, &[&n1, &n2]);
        assert!((norm(&moved) - 1.0).abs() < 1e-6);
        assert!(cos(&moved, &n1) > 0.0 && cos(&moved, &n2) > 0.0);
        // The question still weighs most.
        assert!(cos(&moved, &q) > cos(&moved, &n1));
        assert!((cos(&moved, &n1) - cos(&moved, &n2)).abs() < 1e-6);
        assert_eq!(moved_towards(&[0.0, 2.0], &[]), vec![0.0, 1.0]);
        // A zero vector stays zero rather than becoming NaN.
        assert!(moved_towards(&[0.0, 0.0], &[]).iter().all(|x| *x == 0.0));
    }
}
