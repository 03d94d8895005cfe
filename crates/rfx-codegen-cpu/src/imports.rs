//! Host functions JIT code may call: exact helpers (`fmod`) and, on CPUs with AVX2 and FMA,
//! the ahead-of-time tile routines of [`crate::aot`]; never libm.

use cranelift_codegen::ir::{AbiParam, FuncRef, Function, types};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module, ModuleError};

use crate::aot::{self, AotFn};

/// Exact float remainder with the dividend's sign (C `fmodf`).
extern "C" fn rfx_fmodf(a: f32, b: f32) -> f32 {
    a % b
}

/// Exact float remainder with the dividend's sign (C `fmod`).
extern "C" fn rfx_fmod(a: f64, b: f64) -> f64 {
    a % b
}

/// Registers the helpers' addresses with the JIT.
pub(crate) fn register_symbols(builder: &mut JITBuilder) {
    builder.symbol("rfx_fmodf", rfx_fmodf as *const u8);
    builder.symbol("rfx_fmod", rfx_fmod as *const u8);
    for routine in AotFn::ALL {
        builder.symbol(routine.symbol(), routine.address());
    }
}

/// The helpers declared in a module.
pub(crate) struct ImportIds {
    fmodf: FuncId,
    fmod: FuncId,
    /// The tile routines, in [`AotFn::ALL`] order; `None` when this CPU cannot run them.
    aot: Option<Vec<FuncId>>,
}

impl ImportIds {
    pub(crate) fn declare(module: &mut JITModule) -> Result<ImportIds, Box<ModuleError>> {
        let mut sig32 = module.make_signature();
        sig32
            .params
            .extend([AbiParam::new(types::F32), AbiParam::new(types::F32)]);
        sig32.returns.push(AbiParam::new(types::F32));
        let mut sig64 = module.make_signature();
        sig64
            .params
            .extend([AbiParam::new(types::F64), AbiParam::new(types::F64)]);
        sig64.returns.push(AbiParam::new(types::F64));
        let aot = if aot::available() {
            let ptr = module.target_config().pointer_type();
            let mut sig = module.make_signature();
            sig.params
                .extend([AbiParam::new(ptr), AbiParam::new(ptr), AbiParam::new(types::I64)]);
            let ids = AotFn::ALL
                .iter()
                .map(|routine| module.declare_function(routine.symbol(), Linkage::Import, &sig))
                .collect::<Result<Vec<_>, _>>()
                .map_err(Box::new)?;
            Some(ids)
        } else {
            None
        };
        Ok(ImportIds {
            aot,
            fmodf: module
                .declare_function("rfx_fmodf", Linkage::Import, &sig32)
                .map_err(Box::new)?,
            fmod: module
                .declare_function("rfx_fmod", Linkage::Import, &sig64)
                .map_err(Box::new)?,
        })
    }

    /// References usable inside `func`.
    pub(crate) fn in_func(&self, module: &mut JITModule, func: &mut Function) -> Imports {
        Imports {
            fmodf: module.declare_func_in_func(self.fmodf, func),
            fmod: module.declare_func_in_func(self.fmod, func),
            aot: self.aot.as_ref().map(|ids| {
                ids.iter()
                    .map(|&id| module.declare_func_in_func(id, func))
                    .collect()
            }),
        }
    }
}

/// Helper references inside one function.
pub(crate) struct Imports {
    pub(crate) fmodf: FuncRef,
    pub(crate) fmod: FuncRef,
    /// The tile routines, in [`AotFn::ALL`] order, where the CPU can run them.
    pub(crate) aot: Option<Vec<FuncRef>>,
}

impl Imports {
    /// The reference to `routine` in this function, if the tile routines are linked.
    pub(crate) fn routine(&self, routine: AotFn) -> Option<FuncRef> {
        let index = AotFn::ALL.iter().position(|&r| r == routine)?;
        self.aot.as_ref()?.get(index).copied()
    }
}
