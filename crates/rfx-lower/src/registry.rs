//! Backends by name.

use std::sync::Arc;

use crate::backend::Backend;
use crate::error::BackendError;
use crate::interp_backend::InterpBackend;

/// The backend names rfx knows, whether or not this build includes them.
pub const KNOWN_BACKENDS: [&str; 5] = ["interp", "cpu", "cuda", "metal", "c"];

/// A set of backends, looked up by name.
#[derive(Clone)]
pub struct Registry {
    backends: Vec<Arc<dyn Backend>>,
}

impl Default for Registry {
    /// A registry holding the `"interp"` backend.
    fn default() -> Registry {
        Registry {
            backends: vec![Arc::new(InterpBackend)],
        }
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl Registry {
    /// Adds `backend`, replacing one of the same name.
    pub fn register(&mut self, backend: Arc<dyn Backend>) {
        self.backends.retain(|b| b.name() != backend.name());
        self.backends.push(backend);
    }

    /// The registered names, in registration order.
    pub fn names(&self) -> Vec<&'static str> {
        self.backends.iter().map(|b| b.name()).collect()
    }

    /// The backend called `name`. A known backend missing from this build is
    /// [`BackendError::Unavailable`] (with how to get it); any other name is
    /// [`BackendError::UnknownBackend`].
    pub fn get(&self, name: &str) -> Result<Arc<dyn Backend>, BackendError> {
        if let Some(backend) = self.backends.iter().find(|b| b.name() == name) {
            return Ok(backend.clone());
        }
        match KNOWN_BACKENDS.iter().find(|&&known| known == name) {
            Some(&backend) => Err(BackendError::Unavailable {
                backend,
                reason: format!(
                    "this build of rfx does not include it (enable the `{backend}` cargo feature of rfx-runtime)"
                ),
            }),
            None => Err(BackendError::UnknownBackend {
                name: name.to_string(),
                known: self.names().join(", "),
            }),
        }
    }
}
