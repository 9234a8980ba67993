//! `--web.config.file`: TLS and basic auth, in the Prometheus exporter toolkit's format.
//!
//! The file `node_exporter` and Prometheus itself take (`tls_server_config` with
//! `cert_file`, `key_file`, and optionally `client_auth_type` with `client_ca_file`,
//! `min_version`, `max_version`; `basic_auth_users`, each a bcrypt hash), so one file
//! serves them all. Relative paths are from the file's own directory, as the toolkit reads
//! them. What tracer cannot honour is refused at start rather than ignored: a client
//! certificate asked for but never verified, TLS before 1.2, the toolkit's cipher and curve
//! choices (rustls' defaults are the safe ones).
//!
//! Re-read when it changes, as `node_exporter` does, but without reading it for every
//! connection: each connection stats the file and those it names (a Kubernetes Secret's
//! update swaps a symlink, which changes what the path stats to), and only a change reads
//! them again. A file that no longer parses keeps the last good config, said once per
//! change. Whether TLS is on is fixed for the life of the process: a listener does not
//! switch between speaking TLS and plain HTTP under its clients.
//!
//! A bcrypt check takes tens of milliseconds of CPU by design. As the exporter toolkit does,
//! credentials that passed are remembered (a hash of user, bcrypt hash and password, so a
//! changed password or a removed user no longer matches), and checks that must run are run
//! one at a time: a client sending wrong passwords by the thousand holds one blocking
//! thread, never the workers nor the scrapes of a client whose credentials passed once.

use std::{
    collections::{BTreeMap, HashSet},
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use base64::Engine as _;
use rustls::{
    ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _},
    server::WebPkiClientVerifier,
};
use sha2::Digest as _;

/// The web config could not be used; says which file and what in it, on one line.
#[derive(Debug, thiserror::Error)]
#[error("--web.config.file {path}: {what}")]
pub struct WebConfigError {
    path: String,
    what: String,
}

/// The file as written; every key the toolkit documents that tracer does not take is
/// refused by name rather than ignored.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFile>,
    basic_auth_users: Option<BTreeMap<String, String>>,
    #[serde(rename = "http_server_config")]
    _http_server_config: Option<HttpFile>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    min_version: Option<String>,
    max_version: Option<String>,
}

/// Taken so that a file written for `node_exporter` parses: `http2` only says whether the
/// toolkit's Go server may offer HTTP/2, and tracer offers HTTP/1.1 only either way.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpFile {
    #[serde(rename = "http2")]
    _http2: Option<bool>,
}

/// A web config as read: what a connection accepted now is served with.
#[derive(Debug)]
pub struct Loaded {
    /// TLS, when the file has `tls_server_config`.
    pub tls: Option<Arc<ServerConfig>>,
    /// User name to bcrypt hash; empty when no basic auth is asked for.
    users: BTreeMap<String, String>,
}

impl Loaded {
    /// Whether requests must carry one of `basic_auth_users`' credentials.
    #[must_use]
    pub fn needs_auth(&self) -> bool {
        !self.users.is_empty()
    }
}

/// What a file's `stat` says, compared to tell that it changed: identity, size, times.
type Stamp = Option<(u64, u64, u64, i64, i64, i64, i64)>;

fn stamp(path: &Path) -> Stamp {
    // Follows symlinks: a Secret's files are links into a directory swapped on update.
    let m = std::fs::metadata(path).ok()?;
    Some((
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

/// The web config of a server, re-read when it changes, and its credentials checker.
#[derive(Debug)]
pub struct WebConfig {
    path: PathBuf,
    state: Mutex<State>,
    /// Hashes of the credentials that passed, for as long as they stay in the config.
    verified: Mutex<HashSet<[u8; 32]>>,
    /// One bcrypt check at a time.
    bcrypt: tokio::sync::Semaphore,
    /// bcrypt checks run so far.
    bcrypt_checks: std::sync::atomic::AtomicU64,
}

#[derive(Debug)]
struct State {
    current: Arc<Loaded>,
    /// The config file, then the files it names.
    files: Vec<PathBuf>,
    /// What `files` stat to when `current` was read.
    stamps: Vec<Stamp>,
    /// What they stat to in a version that failed, said once.
    failed: Option<Vec<Stamp>>,
}

/// Credentials that passed, remembered at most: as many as a config has users, many times
/// over, and small enough to be nothing in memory.
const VERIFIED_MAX: usize = 100;

/// A valid cost-10 bcrypt hash (of a random password nobody knows), checked for a user name
/// the config does not have, so that an unknown user takes as long as a wrong password.
const DUMMY_HASH: &str = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";

impl WebConfig {
    /// Read the web config at `path`, and the files it names.
    ///
    /// # Errors
    /// When a file cannot be read, or says what tracer cannot do: one line saying which.
    pub fn load(path: &Path) -> Result<Self, WebConfigError> {
        // Stamped before reading: a change made while it is read is seen next time.
        let before = stamp(path);
        let (loaded, files) = read(path)?;
        let mut stamps: Vec<Stamp> = files.iter().map(|f| stamp(f)).collect();
        stamps[0] = before;
        let state = State {
            current: Arc::new(loaded),
            files,
            stamps,
            failed: None,
        };
        Ok(Self {
            path: path.to_owned(),
            state: Mutex::new(state),
            verified: Mutex::new(HashSet::new()),
            bcrypt: tokio::sync::Semaphore::new(1),
            bcrypt_checks: std::sync::atomic::AtomicU64::new(0),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the listener speaks TLS: as the file said at start.
    #[must_use]
    pub fn tls(&self) -> bool {
        self.state().current.tls.is_some()
    }

    /// The config to serve a new connection with: re-read first when the file, or one it
    /// names, changed since it was last read. A version that cannot be used leaves the
    /// last good one in force, and is said once on stderr.
    #[must_use]
    pub fn current(&self) -> Arc<Loaded> {
        let mut state = self.state();
        let now: Vec<Stamp> = state.files.iter().map(|f| stamp(f)).collect();
        if now == state.stamps || state.failed.as_ref() == Some(&now) {
            return Arc::clone(&state.current);
        }
        // The file may now name other files: stamp what it names once read.
        let before = stamp(&self.path);
        let outcome = read(&self.path).and_then(|(loaded, files)| {
            if loaded.tls.is_some() == state.current.tls.is_some() {
                Ok((loaded, files))
            } else {
                Err(WebConfigError {
                    path: self.path.display().to_string(),
                    what: "TLS is turned on or off only by a restart".into(),
                })
            }
        });
        match outcome {
            Ok((loaded, files)) => {
                eprintln!(
                    "tracer serve: --web.config.file {} read again: it changed",
                    self.path.display()
                );
                let mut stamps: Vec<Stamp> = files.iter().map(|f| stamp(f)).collect();
                stamps[0] = before;
                state.current = Arc::new(loaded);
                state.files = files;
                state.stamps = stamps;
                state.failed = None;
                self.verified
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clear();
            }
            Err(e) => {
                eprintln!("tracer serve: {e}; the last good web config stays in force");
                state.failed = Some(now);
            }
        }
        Arc::clone(&state.current)
    }

    /// Whether `authorization` (the header's value) carries credentials of `config`'s
    /// users.
    pub async fn allows(&self, config: &Loaded, authorization: Option<&[u8]>) -> bool {
        let Some((user, password)) = authorization.and_then(basic_credentials) else {
            return false;
        };
        let known = config.users.get(&user);
        let hash = known.map_or(DUMMY_HASH, String::as_str);
        let key: [u8; 32] = {
            let mut h = sha2::Sha256::new();
            for part in [user.as_bytes(), hash.as_bytes(), password.as_bytes()] {
                h.update((part.len() as u64).to_le_bytes());
                h.update(part);
            }
            h.finalize().into()
        };
        if known.is_some() && self.verified().contains(&key) {
            return true;
        }
        // Waiting here is bounded by the request timeout, which drops this future.
        let Ok(_one_at_a_time) = self.bcrypt.acquire().await else {
            return false;
        };
        self.bcrypt_checks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let hash = hash.to_owned();
        let ok = tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash))
            .await
            .is_ok_and(|r| r.unwrap_or(false))
            && known.is_some();
        if ok {
            let mut verified = self.verified();
            if verified.len() >= VERIFIED_MAX
                && let Some(any) = verified.iter().next().copied()
            {
                verified.remove(&any);
            }
            verified.insert(key);
        }
        ok
    }

    /// bcrypt checks run so far.
    #[cfg(test)]
    pub fn bcrypt_checks(&self) -> u64 {
        self.bcrypt_checks
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn verified(&self) -> MutexGuard<'_, HashSet<[u8; 32]>> {
        self.verified.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// User and password of an `Authorization: Basic` header's value.
fn basic_credentials(value: &[u8]) -> Option<(String, String)> {
    let value = std::str::from_utf8(value).ok()?.trim();
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// Read the config at `path`: what it says, and the files it names (`path` first).
fn read(path: &Path) -> Result<(Loaded, Vec<PathBuf>), WebConfigError> {
    let fail = |what: String| WebConfigError {
        path: path.display().to_string(),
        what,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read it: {e}")))?;
    let file = parse(&text).map_err(fail)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut files = vec![path.to_owned()];
    let tls = match &file.tls_server_config {
        Some(t) => Some(tls(dir, t, &mut files).map_err(fail)?),
        None => None,
    };
    let users = file.basic_auth_users.unwrap_or_default();
    for (user, hash) in &users {
        if user.contains(':') {
            return Err(fail(format!(
                "basic_auth_users: user {user:?} has a ':', which basic auth cannot carry"
            )));
        }
        if hash.parse::<bcrypt::HashParts>().is_err() {
            return Err(fail(format!(
                "basic_auth_users: {user}'s password is not a bcrypt hash \
                 (make one with `htpasswd -nBC 10 {user}`)"
            )));
        }
    }
    Ok((Loaded { tls, users }, files))
}

/// The file's YAML, on one line when it is wrong. A file of comments alone is an empty
/// config, as the toolkit takes it.
fn parse(text: &str) -> Result<File, String> {
    let empty = text
        .lines()
        .map(str::trim)
        .all(|l| l.is_empty() || l.starts_with('#') || l == "---");
    if empty {
        return Ok(File::default());
    }
    serde_saphyr::from_str::<File>(text).map_err(|e| {
        let said = e.without_snippet().to_string();
        said.split_whitespace().collect::<Vec<_>>().join(" ")
    })
}

/// The rustls config `tls_server_config` asks for; the files it reads are pushed to
/// `files`.
fn tls(dir: &Path, t: &TlsFile, files: &mut Vec<PathBuf>) -> Result<Arc<ServerConfig>, String> {
    let given = |s: &Option<String>| s.as_deref().filter(|s| !s.is_empty()).map(|s| dir.join(s));
    let (cert, key) = match (given(&t.cert_file), given(&t.key_file)) {
        (Some(c), Some(k)) => (c, k),
        (None, None) => return Err("tls_server_config needs cert_file and key_file".into()),
        (Some(_), None) => return Err("tls_server_config: cert_file without key_file".into()),
        (None, Some(_)) => return Err("tls_server_config: key_file without cert_file".into()),
    };
    let ca = given(&t.client_ca_file);
    files.extend([cert.clone(), key.clone()]);
    files.extend(ca.clone());
    let chain = CertificateDer::pem_file_iter(&cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| format!("cert_file {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "cert_file {}: no PEM certificate in it",
            cert.display()
        ));
    }
    let private = PrivateKeyDer::from_pem_file(&key)
        .map_err(|e| format!("key_file {}: {e}", key.display()))?;
    #[expect(
        deprecated,
        reason = "ring has no post-quantum key exchange, but it cross-builds to a static \
                  aarch64 binary with a C compiler alone; aws-lc-rs needs cmake and more"
    )]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions = versions(t.min_version.as_deref(), t.max_version.as_deref())?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| format!("tls_server_config: {e}"))?;
    let mode = t.client_auth_type.as_deref().unwrap_or("NoClientCert");
    let verifier = match (mode, &ca) {
        ("NoClientCert" | "", None) => WebPkiClientVerifier::no_client_auth(),
        ("NoClientCert" | "", Some(_)) => {
            return Err(
                "tls_server_config: client_ca_file without a client_auth_type \
                        (RequireAndVerifyClientCert or VerifyClientCertIfGiven)"
                    .into(),
            );
        }
        ("RequireAndVerifyClientCert" | "VerifyClientCertIfGiven", None) => {
            return Err(format!("tls_server_config: {mode} needs client_ca_file"));
        }
        ("RequireAndVerifyClientCert" | "VerifyClientCertIfGiven", Some(ca)) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(ca)
                .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                .map_err(|e| format!("client_ca_file {}: {e}", ca.display()))?
            {
                roots
                    .add(c)
                    .map_err(|e| format!("client_ca_file {}: {e}", ca.display()))?;
            }
            let b = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let b = if mode == "VerifyClientCertIfGiven" {
                b.allow_unauthenticated()
            } else {
                b
            };
            b.build()
                .map_err(|e| format!("client_ca_file {}: {e}", ca.display()))?
        }
        ("RequestClientCert" | "RequireAnyClientCert", _) => {
            return Err(format!(
                "tls_server_config: client_auth_type {mode} is not served: a client \
                 certificate nobody verifies proves nothing (use RequireAndVerifyClientCert \
                 or VerifyClientCertIfGiven with client_ca_file)"
            ));
        }
        (other, _) => {
            return Err(format!(
                "tls_server_config: client_auth_type {other:?} is none of NoClientCert, \
                 VerifyClientCertIfGiven, RequireAndVerifyClientCert"
            ));
        }
    };
    let mut config = builder
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, private)
        .map_err(|e| {
            format!(
                "cert_file {} with key_file {}: {e}",
                cert.display(),
                key.display()
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The TLS versions from `min_version` to `max_version` (TLS12 and TLS13 by default, as
/// the toolkit's minimum is TLS12).
fn versions(
    min: Option<&str>,
    max: Option<&str>,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let rank = |v: Option<&str>, default: u8, key: &str| match v {
        None | Some("") => Ok(default),
        Some("TLS12") => Ok(2),
        Some("TLS13") => Ok(3),
        Some("TLS10" | "TLS11") => Err(format!(
            "tls_server_config: {key} {}: only TLS12 and TLS13 are served",
            v.unwrap_or_default()
        )),
        Some(other) => Err(format!(
            "tls_server_config: {key} {other:?} is neither TLS12 nor TLS13"
        )),
    };
    let (lo, hi) = (rank(min, 2, "min_version")?, rank(max, 3, "max_version")?);
    let out: Vec<_> = [(2, &rustls::version::TLS12), (3, &rustls::version::TLS13)]
        .into_iter()
        .filter(|(r, _)| (lo..=hi).contains(r))
        .map(|(_, v)| v)
        .collect();
    if out.is_empty() {
        return Err("tls_server_config: min_version is above max_version".into());
    }
    Ok(out)
}

#[cfg(test)]
#[path = "web_tests.rs"]
mod tests;
