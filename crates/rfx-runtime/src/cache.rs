//! The compiled-kernel cache (TinyJIT style) and its miss explanations.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use rfx_ir::hir::Kernel;
use rfx_ir::{DType, Shape, TensorType};
use rfx_lower::Registry;

use crate::config::CompileConfig;
use crate::error::RuntimeError;
use crate::executable::{Executable, Fingerprint, compile};

/// What a compiled kernel is looked up by: the kernel (its fingerprint, when the kernel is
/// known before the lookup; a traced function's cache belongs to the function, so its kernel
/// is identified by the cache itself), the name, dtype and shape of every input, the backend
/// and every stage's options.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// The kernel's fingerprint, for kernels given as HIR; `None` for traced functions.
    pub kernel: Option<Fingerprint>,
    /// `(name, type)` of every input, in call order.
    pub inputs: Vec<(String, TensorType)>,
    /// The backend's name.
    pub backend: String,
    /// The optimiser, lowering and backend options, as deterministic text.
    pub options: [String; 3],
}

impl CacheKey {
    /// The key of a call with `inputs` under `config`.
    pub fn new(
        kernel: Option<Fingerprint>,
        inputs: Vec<(String, TensorType)>,
        config: &CompileConfig,
    ) -> CacheKey {
        CacheKey {
            kernel,
            inputs,
            backend: config.backend.clone(),
            options: config.options_key(),
        }
    }

    /// The key of `kernel` (its fingerprint and declared inputs) under `config`.
    pub fn of_kernel(kernel: &Kernel, config: &CompileConfig) -> CacheKey {
        let inputs = kernel
            .inputs()
            .map(|(_, name, ty)| (name.to_string(), ty.clone()))
            .collect();
        CacheKey::new(Some(Fingerprint::of(kernel)), inputs, config)
    }
}

/// One difference between a missed key and the key used before it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MissReason {
    /// Nothing was cached yet.
    FirstCall,
    /// The cache was cleared since the last call.
    Cleared,
    /// A different kernel (fingerprint) was asked for.
    Kernel {
        /// The previous fingerprint.
        from: Option<Fingerprint>,
        /// The new one.
        to: Option<Fingerprint>,
    },
    /// The number of inputs changed.
    InputCount {
        /// Inputs before.
        from: usize,
        /// Inputs now.
        to: usize,
    },
    /// Input `index` is named differently.
    InputName {
        /// The position.
        index: usize,
        /// The previous name.
        from: String,
        /// The new name.
        to: String,
    },
    /// The dtype of an input changed.
    InputDType {
        /// The input.
        name: String,
        /// Its previous dtype.
        from: DType,
        /// Its dtype now.
        to: DType,
    },
    /// The shape of an input changed.
    InputShape {
        /// The input.
        name: String,
        /// Its previous shape.
        from: Shape,
        /// Its shape now.
        to: Shape,
    },
    /// The backend changed.
    Backend {
        /// The previous backend.
        from: String,
        /// The new one.
        to: String,
    },
    /// Options of a compiler stage changed.
    Options {
        /// `"optimiser"`, `"lowering"` or `"backend"`.
        stage: &'static str,
        /// The previous options.
        from: String,
        /// The new options.
        to: String,
    },
    /// The key was seen before but compiling it failed, so nothing was cached.
    PreviousFailure,
}

impl fmt::Display for MissReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opt_fp = |fp: &Option<Fingerprint>| fp.map_or_else(|| "traced".to_string(), |fp| fp.to_string());
        match self {
            MissReason::FirstCall => f.write_str("first call"),
            MissReason::Cleared => f.write_str("the cache was cleared"),
            MissReason::Kernel { from, to } => write!(f, "kernel: {} → {}", opt_fp(from), opt_fp(to)),
            MissReason::InputCount { from, to } => write!(f, "number of inputs: {from} → {to}"),
            MissReason::InputName { index, from, to } => {
                write!(f, "name of input {index}: `{from}` → `{to}`")
            }
            MissReason::InputDType { name, from, to } => write!(f, "dtype of input `{name}`: {from} → {to}"),
            MissReason::InputShape { name, from, to } => write!(f, "shape of input `{name}`: {from} → {to}"),
            MissReason::Backend { from, to } => write!(f, "backend: {from} → {to}"),
            MissReason::Options { stage, from, to } => write!(f, "{stage} options: {from} → {to}"),
            MissReason::PreviousFailure => f.write_str("compiling this key failed before"),
        }
    }
}

/// One cache miss: the key that missed and why it differs from the key used before it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheMiss {
    /// The kernel's name (for traced functions, the function's name).
    pub name: String,
    /// The key that missed.
    pub key: CacheKey,
    /// What changed since the previous call (at least one reason).
    pub reasons: Vec<MissReason>,
}

impl fmt::Display for CacheMiss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cache miss for `{}`: ", self.name)?;
        for (i, reason) in self.reasons.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{reason}")?;
        }
        Ok(())
    }
}

/// The reasons `new` misses where `old` was the key used before (`None`: no call yet).
pub fn explain_miss(old: Option<&CacheKey>, new: &CacheKey) -> Vec<MissReason> {
    let Some(old) = old else {
        return vec![MissReason::FirstCall];
    };
    let mut reasons = Vec::new();
    if old.kernel != new.kernel {
        reasons.push(MissReason::Kernel {
            from: old.kernel,
            to: new.kernel,
        });
    }
    if old.inputs.len() != new.inputs.len() {
        reasons.push(MissReason::InputCount {
            from: old.inputs.len(),
            to: new.inputs.len(),
        });
    }
    for (index, ((old_name, old_ty), (name, ty))) in old.inputs.iter().zip(&new.inputs).enumerate() {
        if old_name != name {
            reasons.push(MissReason::InputName {
                index,
                from: old_name.clone(),
                to: name.clone(),
            });
        }
        if old_ty.dtype != ty.dtype {
            reasons.push(MissReason::InputDType {
                name: name.clone(),
                from: old_ty.dtype,
                to: ty.dtype,
            });
        }
        if old_ty.shape != ty.shape {
            reasons.push(MissReason::InputShape {
                name: name.clone(),
                from: old_ty.shape.clone(),
                to: ty.shape.clone(),
            });
        }
    }
    if old.backend != new.backend {
        reasons.push(MissReason::Backend {
            from: old.backend.clone(),
            to: new.backend.clone(),
        });
    }
    for (stage, (from, to)) in ["optimiser", "lowering", "backend"]
        .into_iter()
        .zip(old.options.iter().zip(&new.options))
    {
        if from != to {
            reasons.push(MissReason::Options {
                stage,
                from: from.clone(),
                to: to.clone(),
            });
        }
    }
    if reasons.is_empty() {
        reasons.push(MissReason::PreviousFailure);
    }
    reasons
}

/// `true` when `RFX_LOG` (a comma-separated list) contains `cache`.
fn log_cache() -> bool {
    std::env::var("RFX_LOG").is_ok_and(|v| v.split(',').any(|item| item.trim() == "cache"))
}

type Slot = Mutex<Option<Arc<Executable>>>;

#[derive(Default)]
struct History {
    last_key: Option<Arc<CacheKey>>,
    last_miss: Option<CacheMiss>,
    cleared: bool,
}

/// A TinyJIT-style cache of compiled kernels: the first call with a key traces (or takes) the
/// kernel, optimises, lowers and compiles it; later calls with the same key replay the compiled
/// kernel. Every miss is explained ([`Cache::last_miss`], and on stderr when `RFX_LOG=cache`).
///
/// Thread-safe: concurrent callers with one key wait for a single compile; callers with other
/// keys proceed. A failed compile caches nothing (the next call tries again).
pub struct Cache {
    name: String,
    slots: RwLock<HashMap<Arc<CacheKey>, Arc<Slot>>>,
    history: Mutex<History>,
    compiles: AtomicUsize,
    hits: AtomicUsize,
}

impl fmt::Debug for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("name", &self.name)
            .field("compiles", &self.compile_count())
            .field("hits", &self.hit_count())
            .finish_non_exhaustive()
    }
}

impl Cache {
    /// An empty cache for the function or kernel called `name` (used in miss explanations).
    pub fn new(name: impl Into<String>) -> Cache {
        Cache {
            name: name.into(),
            slots: RwLock::new(HashMap::new()),
            history: Mutex::new(History::default()),
            compiles: AtomicUsize::new(0),
            hits: AtomicUsize::new(0),
        }
    }

    /// The name given at construction.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many kernels this cache has compiled (successfully) since it was made.
    pub fn compile_count(&self) -> usize {
        self.compiles.load(Ordering::Relaxed)
    }

    /// How many lookups found a compiled kernel.
    pub fn hit_count(&self) -> usize {
        self.hits.load(Ordering::Relaxed)
    }

    /// How many compiled kernels the cache holds.
    pub fn len(&self) -> usize {
        self.slots
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|slot| slot.lock().unwrap_or_else(PoisonError::into_inner).is_some())
            .count()
    }

    /// `true` when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every compiled kernel; the next call of each key compiles again. The compile
    /// count keeps counting.
    pub fn clear(&self) {
        self.slots.write().unwrap_or_else(PoisonError::into_inner).clear();
        let mut history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
        history.cleared = true;
    }

    /// The most recent miss and its reasons.
    pub fn last_miss(&self) -> Option<CacheMiss> {
        self.history
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last_miss
            .clone()
    }

    /// The compiled kernel for `key`, if cached. Does not count as a call.
    pub fn get(&self, key: &CacheKey) -> Option<Arc<Executable>> {
        let slot = self
            .slots
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned()?;
        slot.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The compiled kernel for `key`: cached, or made by `make_kernel` (tracing) and compiled
    /// with `config` by a backend of `registry`. `key` must describe what `make_kernel`
    /// produces under `config` (the facade builds both from one call).
    pub fn get_or_compile<E>(
        &self,
        key: CacheKey,
        config: &CompileConfig,
        registry: &Registry,
        make_kernel: impl FnOnce() -> Result<Kernel, E>,
    ) -> Result<Arc<Executable>, E>
    where
        E: From<RuntimeError>,
    {
        let found = self
            .slots
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get_key_value(&key)
            .map(|(k, slot)| (k.clone(), slot.clone()));
        let (key, slot) = match found {
            Some(entry) => entry,
            None => {
                let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
                let key = Arc::new(key);
                let entry = slots.entry(key.clone()).or_default();
                (key, entry.clone())
            }
        };
        // Holding the slot while compiling makes concurrent callers of this key wait for one
        // compile instead of compiling it again.
        let mut guard = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(exe) = guard.as_ref() {
            self.hits.fetch_add(1, Ordering::Relaxed);
            self.note_use(&key);
            return Ok(exe.clone());
        }
        self.note_miss(&key);
        let compiled = make_kernel().and_then(|kernel| compile(&kernel, config, registry).map_err(E::from));
        let exe = match compiled {
            Ok(exe) => Arc::new(exe),
            Err(e) => {
                // A failed trace or compile leaves no empty slot behind: many distinct failing
                // keys must not grow the map.
                drop(guard);
                self.forget_if_empty(&key, &slot);
                return Err(e);
            }
        };
        self.compiles.fetch_add(1, Ordering::Relaxed);
        *guard = Some(exe.clone());
        Ok(exe)
    }

    /// Removes `key`'s slot when it is still `slot`, empty, and nobody is compiling into it
    /// (a caller waiting on it compiles for itself and keeps its own result on success).
    fn forget_if_empty(&self, key: &Arc<CacheKey>, slot: &Arc<Slot>) {
        let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        let ours = slots.get(&**key).is_some_and(|s| Arc::ptr_eq(s, slot));
        let empty = slot.try_lock().is_ok_and(|g| g.is_none());
        if ours && empty {
            slots.remove(&**key);
        }
    }

    fn note_use(&self, key: &Arc<CacheKey>) {
        let mut history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
        if history
            .last_key
            .as_ref()
            .is_none_or(|last| !Arc::ptr_eq(last, key))
        {
            history.last_key = Some(key.clone());
        }
    }

    fn note_miss(&self, key: &Arc<CacheKey>) {
        let mut history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
        let mut reasons = Vec::new();
        if std::mem::take(&mut history.cleared) {
            reasons.push(MissReason::Cleared);
        }
        let same_key = history.last_key.as_deref() == Some(&**key);
        if !same_key || reasons.is_empty() {
            reasons.extend(explain_miss(history.last_key.as_deref(), key));
        }
        let miss = CacheMiss {
            name: self.name.clone(),
            key: (**key).clone(),
            reasons,
        };
        if log_cache() {
            eprintln!("rfx: {miss}");
        }
        history.last_key = Some(key.clone());
        history.last_miss = Some(miss);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rfx_ir::{DType, TensorType};
    use rfx_lower::CallError;

    #[test]
    fn failed_compiles_leave_no_slots_behind() {
        let cache = Cache::new("failing");
        let config = CompileConfig::with_backend("no-such-backend");
        for n in 1..=50 {
            let key = CacheKey::new(
                None,
                vec![("x".to_string(), TensorType::new(DType::F32, [n]))],
                &config,
            );
            // Odd sizes fail to trace, even ones trace and then meet an unknown backend.
            let result = cache.get_or_compile(key, &config, crate::registry(), || {
                if n % 2 == 1 {
                    return Err(RuntimeError::Call(CallError::UnknownInput(format!("x{n}"))));
                }
                let text =
                    format!("kernel k {{ %x = input x : f32[{n}] %y = neg %x : f32[{n}] output y = %y }}");
                rfx_ir::hir::parse(&text)
                    .map_err(|e| RuntimeError::Call(CallError::UnknownInput(e.to_string())))
            });
            assert!(result.is_err());
        }
        let slots = cache.slots.read().unwrap_or_else(PoisonError::into_inner).len();
        assert_eq!(slots, 0, "every failing key left its slot behind");
        assert_eq!(cache.len(), 0);
    }
}
