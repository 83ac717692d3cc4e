//! Where the e5 model file is looked for, so that an installed binary finds
//! it from any working directory: the configured `embedder.model_path` when
//! it was set to something other than the default; else, in order,
//! `./models/` (the default, relative to the working directory),
//! `$XDG_DATA_HOME/ragscope/models/` (`~/.local/share/ragscope/models/`
//! when the variable is unset), and `models/` beside the binary.

use std::path::{Path, PathBuf};

/// The default `embedder.model_path`.
pub(crate) const DEFAULT_MODEL_PATH: &str = "models/e5-small-q4.bin";

/// The file name the fetch script (and `ragscope models fetch`) writes.
pub(crate) const MODEL_FILE: &str = "e5-small-q4.bin";

/// Where to look, in order.
pub(crate) struct SearchPlaces<'a> {
    /// `embedder.model_path` as configured.
    pub configured: &'a Path,
    /// `$XDG_DATA_HOME`, if set and absolute.
    pub xdg_data_home: Option<PathBuf>,
    /// `$HOME`, if set.
    pub home: Option<PathBuf>,
    /// The directory of the running binary.
    pub exe_dir: Option<PathBuf>,
}

impl SearchPlaces<'_> {
    /// The places of this process.
    pub(crate) fn of_process(configured: &Path) -> SearchPlaces<'_> {
        let env_path = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        SearchPlaces {
            configured,
            xdg_data_home: env_path("XDG_DATA_HOME"),
            home: env_path("HOME"),
            exe_dir: std::env::current_exe()
                .ok()
                .and_then(|e| e.parent().map(Path::to_path_buf)),
        }
    }

    /// The candidate paths, in search order. A configured path other than
    /// the default is the only candidate: it was asked for by name.
    pub(crate) fn candidates(&self) -> Vec<PathBuf> {
        if self.configured != Path::new(DEFAULT_MODEL_PATH) {
            return vec![self.configured.to_path_buf()];
        }
        let mut out = vec![self.configured.to_path_buf()];
        if let Some(d) = self.data_models_dir() {
            out.push(d.join(MODEL_FILE));
        }
        if let Some(e) = &self.exe_dir {
            out.push(e.join("models").join(MODEL_FILE));
        }
        out
    }

    /// `$XDG_DATA_HOME/ragscope/models` (`~/.local/share/ragscope/models`
    /// when the variable is unset): the user's place for models, where
    /// `ragscope models fetch` puts the model file.
    pub(crate) fn data_models_dir(&self) -> Option<PathBuf> {
        self.xdg_data_home
            .clone()
            .or_else(|| self.home.as_ref().map(|h| h.join(".local/share")))
            .map(|d| d.join("ragscope/models"))
    }

    /// The first candidate that is a file, else the first candidate (so a
    /// message can name where the file was expected).
    pub(crate) fn resolve(&self) -> (PathBuf, bool) {
        let candidates = self.candidates();
        match candidates.iter().find(|p| p.is_file()) {
            Some(p) => (p.clone(), true),
            None => (candidates[0].clone(), false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_is_found_in_order_and_a_named_path_is_the_only_place() {
        let dir = tempfile::tempdir().unwrap();
        let xdg = dir.path().join("xdg");
        let exe = dir.path().join("bin");
        let places = |configured| SearchPlaces {
            configured,
            xdg_data_home: Some(xdg.clone()),
            home: Some(dir.path().join("home")),
            exe_dir: Some(exe.clone()),
        };
        let default = Path::new(DEFAULT_MODEL_PATH);
        // Nothing anywhere: not found, the default named.
        assert_eq!(places(default).resolve(), (default.to_path_buf(), false));
        // Beside the binary.
        let beside = exe.join("models").join(MODEL_FILE);
        std::fs::create_dir_all(beside.parent().unwrap()).unwrap();
        std::fs::write(&beside, b"m").unwrap();
        assert_eq!(places(default).resolve(), (beside.clone(), true));
        // The data directory comes before it.
        let data = xdg.join("ragscope/models").join(MODEL_FILE);
        std::fs::create_dir_all(data.parent().unwrap()).unwrap();
        std::fs::write(&data, b"m").unwrap();
        assert_eq!(places(default).resolve(), (data.clone(), true));
        // Without XDG_DATA_HOME, ~/.local/share.
        let home_places = SearchPlaces {
            xdg_data_home: None,
            ..places(default)
        };
        assert_eq!(
            home_places.candidates()[1],
            dir.path()
                .join("home/.local/share/ragscope/models")
                .join(MODEL_FILE)
        );
        // A path set by name is the only place, found or not.
        let named = dir.path().join("elsewhere.bin");
        assert_eq!(places(&named).resolve(), (named.clone(), false));
        assert_eq!(places(&named).candidates(), [named]);
    }
}
