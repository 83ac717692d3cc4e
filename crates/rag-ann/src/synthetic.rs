//! Deterministic synthetic vectors for tests, examples and benchmarks.
//!
//! Real sentence embeddings are not spread uniformly over the sphere: they form
//! topical clusters. [`ClusteredVectors`] imitates that with Gaussian clouds around
//! random unit centres, which is a harder and more honest workload for an
//! approximate index than uniform noise. Everything is derived from a seed through
//! [`SplitMix64`], so runs are reproducible without a dependency on `rand`.

/// The SplitMix64 generator: tiny, fast and good enough for test data.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
    spare_gaussian: Option<f64>,
}

impl SplitMix64 {
    /// A generator with the given seed.
    pub fn new(seed: u64) -> Self {
        Self {
            state: seed,
            spare_gaussian: None,
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform number in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform number in `[0, 1)`.
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u32 << 24) as f32)
    }

    /// A uniform integer in `0..n`; `n` must be positive.
    pub fn below(&mut self, n: usize) -> usize {
        // The modulo bias is negligible for the small ranges tests use.
        (self.next_u64() % n as u64) as usize
    }

    /// A standard normal sample (Box–Muller; the second value is kept for the next call).
    pub fn gaussian(&mut self) -> f64 {
        if let Some(z) = self.spare_gaussian.take() {
            return z;
        }
        // `1 - u` lies in (0, 1], so the logarithm is finite.
        let u = 1.0 - self.next_f64();
        let v = self.next_f64();
        let r = (-2.0 * u.ln()).sqrt();
        let theta = std::f64::consts::TAU * v;
        self.spare_gaussian = Some(r * theta.sin());
        r * theta.cos()
    }

    /// A vector of `len` standard normal samples.
    pub fn gaussian_vec(&mut self, len: usize) -> Vec<f32> {
        (0..len).map(|_| self.gaussian() as f32).collect()
    }
}

/// A generator of vectors scattered around a fixed set of random unit centres.
#[derive(Debug, Clone)]
pub struct ClusteredVectors {
    dims: usize,
    centres: Vec<f32>,
    noise: f32,
    rng: SplitMix64,
}

impl ClusteredVectors {
    /// `clusters` centres on the unit sphere of dimension `dims`; each sample adds
    /// isotropic Gaussian noise whose expected norm is `noise` (so `noise = 1.0`
    /// makes the noise as long as the centre).
    pub fn new(dims: usize, clusters: usize, noise: f32, seed: u64) -> Self {
        assert!(
            dims > 0 && clusters > 0,
            "dims and clusters must be positive"
        );
        let mut rng = SplitMix64::new(seed);
        let mut centres = Vec::with_capacity(dims * clusters);
        for _ in 0..clusters {
            let mut c = rng.gaussian_vec(dims);
            let norm = c.iter().map(|x| x * x).sum::<f32>().sqrt();
            c.iter_mut().for_each(|x| *x /= norm);
            centres.extend_from_slice(&c);
        }
        Self {
            dims,
            centres,
            noise,
            rng,
        }
    }

    /// The dimension of the generated vectors.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The next sample (not normalised; indexes do that).
    pub fn sample(&mut self) -> Vec<f32> {
        let clusters = self.centres.len() / self.dims;
        let c = self.rng.below(clusters);
        let sigma = self.noise / (self.dims as f32).sqrt();
        let centre = &self.centres[c * self.dims..(c + 1) * self.dims];
        centre
            .iter()
            .map(|&x| x + sigma * self.rng.gaussian() as f32)
            .collect()
    }

    /// `n` samples stored row-major in one contiguous buffer.
    pub fn matrix(&mut self, n: usize) -> Vec<f32> {
        let mut out = Vec::with_capacity(n * self.dims);
        for _ in 0..n {
            let v = self.sample();
            out.extend_from_slice(&v);
        }
        out
    }
}
