//! The compute part of `ragscope tune`: k-fold cross-validation, a
//! seeded paired bootstrap and the candidate chooser. Pure functions, no I/O.

/// A small deterministic generator (SplitMix64): the folds and the
/// bootstrap depend on the seed only.
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// The test indices of each of `k` folds over `0..n`: a seeded shuffle cut
/// into `k` nearly equal parts. Every index is in exactly one fold.
pub fn folds(n: usize, k: usize, seed: u64) -> Vec<Vec<usize>> {
    let k = k.clamp(1, n.max(1));
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = SplitMix::new(seed);
    for i in (1..n).rev() {
        let j = rng.below(i + 1);
        order.swap(i, j);
    }
    let mut out = vec![Vec::new(); k];
    for (pos, idx) in order.into_iter().enumerate() {
        out[pos % k].push(idx);
    }
    for f in &mut out {
        f.sort_unstable();
    }
    out
}

/// One fold's outcome: its held-out questions, the questions the choice was
/// made on, and the candidate chosen.
#[derive(Debug, Clone)]
pub struct FoldChoice {
    pub test: Vec<usize>,
    pub train: Vec<usize>,
    pub chosen: usize,
}

/// k-fold cross-validation over `n` questions. For each fold, `choose`
/// receives the training questions only (the other folds) and returns a
/// candidate; that candidate is then scored on the held-out fold by the
/// caller. The held-out fold is never passed to `choose`.
pub fn cross_validate(
    n: usize,
    k: usize,
    seed: u64,
    mut choose: impl FnMut(&[usize]) -> usize,
) -> Vec<FoldChoice> {
    let parts = folds(n, k, seed);
    parts
        .iter()
        .enumerate()
        .map(|(f, test)| {
            let train: Vec<usize> = parts
                .iter()
                .enumerate()
                .filter(|(g, _)| *g != f)
                .flat_map(|(_, p)| p.iter().copied())
                .collect();
            let chosen = choose(&train);
            FoldChoice {
                test: test.clone(),
                train,
                chosen,
            }
        })
        .collect()
}

/// The candidate with the best mean objective over `questions`
/// (`objective[candidate][question]`); ties go to the lowest index, so
/// candidate 0 (the current settings) wins unless another is strictly better.
pub fn best_on(objective: &[Vec<f64>], questions: &[usize]) -> usize {
    let mut best = 0;
    let mut best_sum = f64::NEG_INFINITY;
    for (c, scores) in objective.iter().enumerate() {
        let sum: f64 = questions.iter().map(|&q| scores[q]).sum();
        if sum > best_sum + 1e-12 {
            best = c;
            best_sum = sum;
        }
    }
    best
}

/// A paired bootstrap of the mean of `after[i] - before[i]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bootstrap {
    pub mean: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Bootstrap {
    /// Whether the interval lies strictly above zero.
    pub fn excludes_zero_above(&self) -> bool {
        self.lo > 0.0
    }
}

/// The mean paired difference and its percentile 95 % interval from
/// `resamples` seeded resamples of the questions (with replacement).
pub fn paired_bootstrap(before: &[f64], after: &[f64], resamples: usize, seed: u64) -> Bootstrap {
    assert_eq!(before.len(), after.len(), "paired samples");
    let n = before.len();
    if n == 0 {
        return Bootstrap {
            mean: 0.0,
            lo: 0.0,
            hi: 0.0,
        };
    }
    let diffs: Vec<f64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
    let mean = diffs.iter().sum::<f64>() / n as f64;
    let mut rng = SplitMix::new(seed);
    let mut means: Vec<f64> = (0..resamples.max(1))
        .map(|_| (0..n).map(|_| diffs[rng.below(n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |p: f64| means[((means.len() - 1) as f64 * p).round() as usize];
    Bootstrap {
        mean,
        // The percentile interval of a skewed sample can miss its own mean
        // by rounding; it is widened to hold it.
        lo: at(0.025).min(mean),
        hi: at(0.975).max(mean),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_partition_the_questions() {
        let f = folds(23, 5, 7);
        assert_eq!(f.len(), 5);
        let mut all: Vec<usize> = f.concat();
        all.sort_unstable();
        assert_eq!(all, (0..23).collect::<Vec<_>>());
        assert!(f.iter().all(|p| p.len() == 4 || p.len() == 5));
        assert_eq!(f, folds(23, 5, 7), "same seed, same folds");
    }

    #[test]
    fn the_chooser_never_sees_a_held_out_question() {
        let n = 40;
        let mut seen: Vec<Vec<usize>> = Vec::new();
        let out = cross_validate(n, 5, 11, |train| {
            seen.push(train.to_vec());
            train.len() % 3
        });
        assert_eq!(out.len(), 5);
        for (fold, train) in out.iter().zip(&seen) {
            assert_eq!(&fold.train, train);
            assert!(
                fold.test.iter().all(|q| !train.contains(q)),
                "a held-out question was used for a choice"
            );
            assert_eq!(fold.test.len() + train.len(), n);
        }
        // Every question is held out exactly once.
        let mut tests: Vec<usize> = out.iter().flat_map(|f| f.test.clone()).collect();
        tests.sort_unstable();
        assert_eq!(tests, (0..n).collect::<Vec<_>>());
    }

    #[test]
    fn choosing_on_training_folds_cannot_see_test_scores() {
        // Candidate 1 is perfect on question 0 only. With question 0 held
        // out, the choice must not depend on it.
        let objective = vec![vec![0.5; 10], {
            let mut v = vec![0.0; 10];
            v[0] = 1.0;
            v
        }];
        let out = cross_validate(10, 10, 3, |train| best_on(&objective, train));
        for f in &out {
            assert_eq!(f.chosen, 0, "fold {:?} chose on its own test", f.test);
        }
    }

    #[test]
    fn best_on_prefers_the_first_of_equals() {
        let objective = vec![vec![1.0, 0.0], vec![0.0, 1.0], vec![1.0, 1.0]];
        assert_eq!(best_on(&objective, &[0, 1]), 2);
        assert_eq!(best_on(&objective, &[0]), 0);
        assert_eq!(best_on(&objective[..2], &[0, 1]), 0);
    }

    #[test]
    fn bootstrap_is_deterministic_and_holds_the_mean() {
        let mut rng = SplitMix::new(5);
        let before: Vec<f64> = (0..200).map(|_| rng.below(100) as f64 / 100.0).collect();
        let after: Vec<f64> = before
            .iter()
            .map(|b| b + (rng.below(21) as f64 - 8.0) / 100.0)
            .collect();
        let a = paired_bootstrap(&before, &after, 2000, 42);
        let b = paired_bootstrap(&before, &after, 2000, 42);
        assert_eq!(a, b);
        assert!(a.lo <= a.mean && a.mean <= a.hi, "{a:?}");
        assert!(a.lo < a.hi);
        // A clearly positive shift gives an interval above zero.
        assert!(a.excludes_zero_above(), "{a:?}");
        // No difference: the interval is [0, 0] and does not exclude zero.
        let z = paired_bootstrap(&before, &before, 500, 1);
        assert_eq!((z.lo, z.mean, z.hi), (0.0, 0.0, 0.0));
        assert!(!z.excludes_zero_above());
    }
}
