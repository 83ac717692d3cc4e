//! The fuzzing loop, run in the process that executes the target.
//!
//! Each target runs in a thread of its own with the stack it has in
//! production ([`Target::stack_bytes`]). Inputs are the corpus's seeds, then
//! mutations of the seeds and of inputs that showed new behaviour (a new
//! signature), drawn from one generator with a fixed seed. Every execution is
//! wrapped in `catch_unwind`; a panic is a finding, saved with its input (and
//! a minimised copy) in the crash directory. An input that runs longer than
//! the slow threshold is saved as a slow finding.
//!
//! What `catch_unwind` cannot catch (a stack overflow, an abort, an
//! allocation failure, an endless loop) is handled one level up, by the
//! supervisor in [`crate::supervise`]: before each execution the loop writes
//! the input to a progress file, so the supervisor can save the input that
//! killed or stalled the process.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::mutate::mutate;
use crate::rng::Rng;
use crate::targets::Target;

/// How one run goes.
#[derive(Debug, Clone)]
pub struct Options {
    /// Wall-time budget.
    pub duration: Duration,
    /// Stop after this many executions (seeds included), if set.
    pub max_execs: Option<u64>,
    /// Seed of the mutation generator.
    pub seed: u64,
    /// Seed inputs: every file of this directory (not starting with a dot).
    pub corpus_dir: PathBuf,
    /// Where findings are saved.
    pub crash_dir: PathBuf,
    /// An execution longer than this is a slow finding.
    pub slow: Duration,
    /// Minimise the input of each new panic before saving it.
    pub minimize: bool,
    /// Child mode: the input about to run is written here first.
    pub progress: Option<PathBuf>,
    /// Child mode: findings are appended here (JSON lines) as they happen.
    pub findings_log: Option<PathBuf>,
}

impl Options {
    /// A run of `duration` over the target's corpus in `corpus_root`, with
    /// findings in `crash_root/<target>`.
    pub fn new(target: &Target, corpus_root: &Path, crash_root: &Path, duration: Duration) -> Self {
        Options {
            duration,
            max_execs: None,
            seed: 0x5eed_2026,
            corpus_dir: corpus_root.join(target.name),
            crash_dir: crash_root.join(target.name),
            slow: Duration::from_secs(2),
            minimize: true,
            progress: None,
            findings_log: None,
        }
    }
}

/// What kind of finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A panic escaped the target (or an invariant failed).
    Panic,
    /// The process died: stack overflow, abort, allocation failure, signal.
    Crash,
    /// No progress within the hang limit: the process was killed.
    Hang,
    /// One input ran longer than the slow threshold.
    Slow,
}

/// One finding.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finding {
    /// What happened.
    pub kind: Kind,
    /// The panic message and place, or the end of the process's stderr.
    pub message: String,
    /// The saved input.
    pub input: Option<PathBuf>,
    /// The saved minimised input (panics only).
    pub minimized: Option<PathBuf>,
    /// Input length in bytes.
    pub len: usize,
    /// Milliseconds the input ran (slow findings), or ran before the hang kill.
    pub ms: u64,
    /// How often this same finding was seen.
    pub hits: u64,
}

/// The result of a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    /// Target name.
    pub target: String,
    /// Executions, seeds included.
    pub execs: u64,
    /// Seed files.
    pub seeds: usize,
    /// Inputs kept as parents at the end (seeds plus new behaviours).
    pub pool: usize,
    /// Distinct behaviour signatures seen.
    pub signatures: usize,
    /// Wall time, in milliseconds.
    pub elapsed_ms: u64,
    /// The slowest execution, in milliseconds.
    pub slowest_ms: u64,
    /// Panics caught inside the code under test and turned into errors
    /// (rag-ingest wraps pdf-extract in `catch_unwind`): not bugs of
    /// ragscope, but bugs of the library, counted by place.
    pub contained_panics: u64,
    /// Where they happened (first line of the message and location).
    pub contained_sites: BTreeMap<String, u64>,
    /// Findings.
    pub findings: Vec<Finding>,
    /// Times the supervisor restarted the child after a crash or hang.
    pub restarts: u32,
}

impl Report {
    /// Findings that fail a bounded run: panics anywhere; crashes and
    /// hangs of targets that production does not run inside rag-sandbox.
    pub fn failures(&self, target: &Target) -> Vec<&Finding> {
        self.findings
            .iter()
            .filter(|f| match f.kind {
                Kind::Panic => true,
                Kind::Crash | Kind::Hang => !target.contained,
                Kind::Slow => false,
            })
            .collect()
    }

    /// Adds another report of the same target (a restarted child).
    pub fn merge(&mut self, other: Report) {
        self.execs += other.execs;
        self.seeds = self.seeds.max(other.seeds);
        self.pool = self.pool.max(other.pool);
        self.signatures = self.signatures.max(other.signatures);
        self.slowest_ms = self.slowest_ms.max(other.slowest_ms);
        self.contained_panics += other.contained_panics;
        for (k, v) in other.contained_sites {
            *self.contained_sites.entry(k).or_default() += v;
        }
        for f in other.findings {
            self.add_finding(f);
        }
    }

    /// Adds a finding, or counts it again if the same one is there.
    pub fn add_finding(&mut self, f: Finding) {
        let key = finding_key(&f.message);
        if let Some(old) = self
            .findings
            .iter_mut()
            .find(|o| o.kind == f.kind && finding_key(&o.message) == key)
        {
            old.hits += f.hits;
            old.ms = old.ms.max(f.ms);
            return;
        }
        self.findings.push(f);
    }
}

/// What makes two findings the same: the message without digits (offsets,
/// lengths), cut short, plus the location.
pub fn finding_key(message: &str) -> String {
    let (msg, at) = message.rsplit_once(" at ").unwrap_or((message, ""));
    let msg: String = msg
        .chars()
        .filter(|c| !c.is_ascii_digit())
        .take(60)
        .collect();
    format!("{msg} at {at}")
}

// ---- panics ----------------------------------------------------------------

thread_local! {
    static FUZZING: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
    static PANICS: Cell<u64> = const { Cell::new(0) };
}

/// Installs (once) a panic hook that, on fuzzing threads, records the panic
/// silently instead of printing it; other threads keep the previous hook.
pub fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !FUZZING.with(Cell::get) {
                previous(info);
                return;
            }
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(non-string panic)".into());
            let msg: String = msg.chars().take(400).collect();
            let at = info
                .location()
                .map(|l| format!("{}:{}", l.file(), l.line()))
                .unwrap_or_default();
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{msg} at {at}")));
            PANICS.with(|c| c.set(c.get() + 1));
        }));
    });
}

/// The outcome of one execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It returned: its signature, and the last panic caught inside the
    /// code under test, if any.
    Returned {
        /// Behaviour signature.
        sig: u64,
        /// A panic the code caught itself.
        contained: Option<String>,
    },
    /// A panic escaped: its message and place.
    Panicked(String),
}

/// Runs one input on this thread (which must be a fuzzing thread: see
/// [`run_isolated`]).
fn execute(target: &Target, input: &[u8]) -> Outcome {
    let before = PANICS.with(Cell::get);
    LAST_PANIC.with(|p| p.borrow_mut().take());
    match panic::catch_unwind(AssertUnwindSafe(|| (target.run)(input))) {
        Ok(sig) => {
            let contained = if PANICS.with(Cell::get) > before {
                LAST_PANIC.with(|p| p.borrow_mut().take())
            } else {
                None
            };
            Outcome::Returned { sig, contained }
        }
        Err(_) => Outcome::Panicked(
            LAST_PANIC
                .with(|p| p.borrow_mut().take())
                .unwrap_or_else(|| "(panic without message)".into()),
        ),
    }
}

/// Runs `f` on a new fuzzing thread with `stack_bytes` of stack.
pub fn on_fuzz_thread<T: Send + 'static>(
    stack_bytes: usize,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    install_panic_hook();
    let handle = std::thread::Builder::new()
        .name("rag-fuzz".into())
        .stack_size(stack_bytes)
        .spawn(move || {
            FUZZING.with(|c| c.set(true));
            f()
        })
        .unwrap_or_else(|e| panic!("cannot start the fuzzing thread: {e}"));
    match handle.join() {
        Ok(v) => v,
        Err(p) => panic::resume_unwind(p),
    }
}

/// Runs one input in a thread with the target's production stack: what a
/// regression test calls. Returns the outcome and the time it took.
pub fn run_isolated(target: &'static Target, input: Vec<u8>) -> (Outcome, Duration) {
    on_fuzz_thread(target.stack_bytes, move || {
        let t0 = Instant::now();
        let o = execute(target, &input);
        (o, t0.elapsed())
    })
}

// ---- the loop --------------------------------------------------------------

/// Reads the seed files of a directory, sorted by name.
pub fn load_corpus(dir: &Path) -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !e.file_type()?.is_file() {
            continue;
        }
        out.push((name, fs::read(e.path())?));
    }
    out.sort();
    Ok(out)
}

/// A short stable hash of bytes, for file names.
pub fn short_hash(bytes: &[u8]) -> String {
    rag_ingest::sha256_hex(bytes)[..16].to_owned()
}

/// Saves an input under the crash directory; returns its path.
pub fn save(dir: &Path, prefix: &str, input: &[u8]) -> Option<PathBuf> {
    fs::create_dir_all(dir).ok()?;
    let path = dir.join(format!("{prefix}-{}.bin", short_hash(input)));
    fs::write(&path, input).ok()?;
    Some(path)
}

/// Writes the input about to run where the supervisor can read it if the
/// process dies: `[inputs started: u64 LE][len: u64 LE][bytes]` (inputs
/// started count minimisation runs too: the sign of life the supervisor
/// watches).
struct Progress {
    file: File,
}

impl Progress {
    fn open(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(path)?;
        Ok(Progress { file })
    }

    #[cfg(unix)]
    fn record(&self, execs: u64, input: &[u8]) {
        use std::os::unix::fs::FileExt;
        let mut head = [0u8; 16];
        head[..8].copy_from_slice(&execs.to_le_bytes());
        head[8..].copy_from_slice(&(input.len() as u64).to_le_bytes());
        // Best effort: the run goes on if the disk is full.
        let _ = self.file.write_at(input, 16);
        let _ = self.file.write_at(&head, 0);
    }

    #[cfg(not(unix))]
    fn record(&self, execs: u64, input: &[u8]) {
        use std::io::{Seek, SeekFrom};
        let mut f = &self.file;
        let mut buf = Vec::with_capacity(16 + input.len());
        buf.extend_from_slice(&execs.to_le_bytes());
        buf.extend_from_slice(&(input.len() as u64).to_le_bytes());
        buf.extend_from_slice(input);
        let _ = f.seek(SeekFrom::Start(0)).and_then(|_| f.write_all(&buf));
    }
}

/// Reads a progress file: (inputs started, the last input).
pub fn read_progress(path: &Path) -> Option<(u64, Vec<u8>)> {
    let b = fs::read(path).ok()?;
    let execs = u64::from_le_bytes(b.get(..8)?.try_into().ok()?);
    let len = u64::from_le_bytes(b.get(8..16)?.try_into().ok()?) as usize;
    Some((execs, b.get(16..16 + len)?.to_vec()))
}

/// Reads only the inputs-started counter of a progress file.
pub fn read_progress_count(path: &Path) -> Option<u64> {
    use std::io::Read;
    let mut head = [0u8; 8];
    File::open(path).ok()?.read_exact(&mut head).ok()?;
    Some(u64::from_le_bytes(head))
}

struct Loop<'a> {
    target: &'static Target,
    opts: &'a Options,
    report: Report,
    progress: Option<Progress>,
    sigs: HashSet<u64>,
    pool: Vec<Vec<u8>>,
    slow_saved: usize,
    panic_sites: HashMap<String, usize>,
    /// Inputs started, minimisation runs included: the supervisor's sign of life.
    beats: u64,
}

const MAX_POOL: usize = 4096;

impl Loop<'_> {
    fn log(&self, f: &Finding) {
        if let Some(path) = &self.opts.findings_log {
            if let (Ok(mut file), Ok(line)) = (
                OpenOptions::new().create(true).append(true).open(path),
                serde_json::to_string(f),
            ) {
                let _ = writeln!(file, "{line}");
            }
        }
    }

    fn beat(&mut self, input: &[u8]) {
        self.beats += 1;
        if let Some(p) = &self.progress {
            p.record(self.beats, input);
        }
    }

    fn exec(&mut self, input: &[u8]) -> Outcome {
        self.report.execs += 1;
        self.beat(input);
        let t0 = Instant::now();
        let outcome = execute(self.target, input);
        let took = t0.elapsed();
        let ms = took.as_millis() as u64;
        self.report.slowest_ms = self.report.slowest_ms.max(ms);
        if took > self.opts.slow {
            let input_path = if self.slow_saved < 5 {
                self.slow_saved += 1;
                save(&self.opts.crash_dir, "slow", input)
            } else {
                None
            };
            let f = Finding {
                kind: Kind::Slow,
                message: format!("{ms} ms for {} bytes", input.len()),
                input: input_path,
                minimized: None,
                len: input.len(),
                ms,
                hits: 1,
            };
            self.log(&f);
            // All slow inputs are one finding per run, with the worst time.
            let slow = Finding {
                message: "an input over the slow threshold".into(),
                ..f
            };
            self.report.add_finding(slow);
        }
        match &outcome {
            Outcome::Returned { sig, contained } => {
                if let Some(c) = contained {
                    self.report.contained_panics += 1;
                    // By place only: the messages hold the input's bytes.
                    let at = c.rsplit_once(" at ").map_or(c.as_str(), |(_, at)| at);
                    // `~/.cargo/registry/src/<index>/crate-1.2/src/x.rs` → `crate-1.2/src/x.rs`.
                    let at = at
                        .split_once("/registry/src/")
                        .and_then(|(_, rest)| rest.split_once('/'))
                        .map_or(at, |(_, rest)| rest);
                    *self
                        .report
                        .contained_sites
                        .entry(at.to_owned())
                        .or_default() += 1;
                }
                if self.sigs.insert(*sig) && self.pool.len() < MAX_POOL {
                    self.pool.push(input.to_vec());
                }
            }
            Outcome::Panicked(msg) => {
                let key = finding_key(msg);
                let seen = self.panic_sites.entry(key.clone()).or_default();
                *seen += 1;
                if *seen == 1 {
                    let input_path = save(&self.opts.crash_dir, "panic", input);
                    let minimized = if self.opts.minimize {
                        let m = self.minimize(input, &key);
                        save(&self.opts.crash_dir, "panic-min", &m)
                    } else {
                        None
                    };
                    let f = Finding {
                        kind: Kind::Panic,
                        message: msg.clone(),
                        input: input_path,
                        minimized,
                        len: input.len(),
                        ms,
                        hits: 1,
                    };
                    self.log(&f);
                    self.report.add_finding(f);
                } else {
                    self.report.add_finding(Finding {
                        kind: Kind::Panic,
                        message: msg.clone(),
                        input: None,
                        minimized: None,
                        len: input.len(),
                        ms,
                        hits: 1,
                    });
                }
            }
        }
        outcome
    }

    /// Delta debugging: drops chunks (halving their size) while the same
    /// panic happens, for at most 2,000 runs or 10 s.
    fn minimize(&mut self, input: &[u8], key: &str) -> Vec<u8> {
        let t0 = Instant::now();
        let mut runs = 0;
        let mut cur = input.to_vec();
        let mut chunk = cur.len().div_ceil(2).max(1);
        let same = |o: &Outcome| matches!(o, Outcome::Panicked(m) if finding_key(m) == key);
        while runs < 2000 && t0.elapsed() < Duration::from_secs(10) {
            let mut i = 0;
            let mut shrunk = false;
            while i < cur.len() && runs < 2000 {
                let mut cand = cur[..i].to_vec();
                cand.extend_from_slice(&cur[(i + chunk).min(cur.len())..]);
                runs += 1;
                self.beat(&cand);
                if same(&execute(self.target, &cand)) {
                    cur = cand;
                    shrunk = true;
                } else {
                    i += chunk;
                }
            }
            if !shrunk {
                if chunk == 1 {
                    break;
                }
                chunk = chunk.div_ceil(2);
            }
        }
        cur
    }
}

/// Fuzzes `target` for the options' budget on a thread with the target's
/// stack, in this process.
pub fn fuzz(target: &'static Target, opts: Options) -> std::io::Result<Report> {
    on_fuzz_thread(target.stack_bytes, move || fuzz_here(target, &opts))
}

fn fuzz_here(target: &'static Target, opts: &Options) -> std::io::Result<Report> {
    let t0 = Instant::now();
    let seeds = load_corpus(&opts.corpus_dir)?;
    if seeds.is_empty() {
        return Err(std::io::Error::other(format!(
            "no seed files in {}",
            opts.corpus_dir.display()
        )));
    }
    let mut l = Loop {
        target,
        opts,
        report: Report {
            target: target.name.into(),
            seeds: seeds.len(),
            ..Report::default()
        },
        progress: match &opts.progress {
            Some(p) => Some(Progress::open(p)?),
            None => None,
        },
        sigs: HashSet::new(),
        pool: Vec::new(),
        slow_saved: 0,
        panic_sites: HashMap::new(),
        beats: 0,
    };
    for (_, s) in &seeds {
        l.exec(s);
        l.pool.push(s.clone());
    }
    l.pool.dedup();
    let mut rng = Rng::new(opts.seed);
    let done = |l: &Loop| {
        t0.elapsed() >= opts.duration || opts.max_execs.is_some_and(|m| l.report.execs >= m)
    };
    while !done(&l) {
        // Half the time a seed, else any kept input.
        let parent = if rng.one_in(2) {
            &seeds[rng.below(seeds.len())].1
        } else {
            &l.pool[rng.below(l.pool.len())]
        };
        let mut input = parent.clone();
        mutate(
            &target.grammar,
            &mut rng,
            &mut input,
            &l.pool,
            target.max_len,
        );
        l.exec(&input);
    }
    l.report.pool = l.pool.len();
    l.report.signatures = l.sigs.len();
    l.report.elapsed_ms = t0.elapsed().as_millis() as u64;
    Ok(l.report)
}
