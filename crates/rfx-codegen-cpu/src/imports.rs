//! Host functions JIT code may call: exact helpers (`fmod`, and the trigonometric functions of
//! huge arguments, which need a full argument reduction) and, on targets with AVX2 and FMA,
//! the ahead-of-time tile routines of [`crate::aot`]. Every other transcendental is inline code.

use std::cell::RefCell;

use cranelift_codegen::ir::{
    AbiParam, ExtFuncData, ExternalName, FuncRef, Function, Signature, UserExternalName, UserExternalNameRef,
    types,
};
use cranelift_codegen::isa::CallConv;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module, ModuleError};

use crate::aot::AotFn;
use crate::aot::Computes;

/// Exact float remainder with the dividend's sign (C `fmodf`).
extern "C" fn rfx_fmodf(a: f32, b: f32) -> f32 {
    a % b
}

/// Exact float remainder with the dividend's sign (C `fmod`).
extern "C" fn rfx_fmod(a: f64, b: f64) -> f64 {
    a % b
}

/// `sin`, `cos` or `tan` (`op` 0, 1, 2) of a huge `f32` argument, through the host's libm in
/// `f64` (full argument reduction; correctly rounded up to a double rounding).
extern "C" fn rfx_trig_f32(op: i32, x: f32) -> f32 {
    rfx_trig_f64(op, f64::from(x)) as f32
}

/// `sin`, `cos` or `tan` (`op` 0, 1, 2) of a huge `f64` argument, through the host's libm.
extern "C" fn rfx_trig_f64(op: i32, x: f64) -> f64 {
    match op {
        0 => x.sin(),
        1 => x.cos(),
        _ => x.tan(),
    }
}

/// Registers the helpers' addresses with the JIT.
pub(crate) fn register_symbols(builder: &mut JITBuilder) {
    builder.symbol("rfx_fmodf", rfx_fmodf as *const u8);
    builder.symbol("rfx_fmod", rfx_fmod as *const u8);
    builder.symbol("rfx_trig_f32", rfx_trig_f32 as *const u8);
    builder.symbol("rfx_trig_f64", rfx_trig_f64 as *const u8);
    for routine in AotFn::ALL {
        builder.symbol(routine.symbol(), routine.address());
        if let Some((symbol, address)) = routine.one() {
            builder.symbol(symbol, address);
        }
    }
    crate::aot::prepare_tables();
}

/// The helpers declared in a module.
pub(crate) struct ImportIds {
    fmodf: FuncId,
    fmod: FuncId,
    trig_f32: FuncId,
    trig_f64: FuncId,
    /// The tile routines, in [`AotFn::ALL`] order; `None` when the target has none.
    aot: Option<Vec<FuncId>>,
    /// The routines' one-element entries, in [`AotFn::ALL`] order (`None` for a routine
    /// without one); empty when the target has no routines.
    aot_one: Vec<Option<FuncId>>,
}

impl ImportIds {
    /// Declares the helpers in `module`, the tile routines only with `routines` (the target's
    /// [`crate::target::Features::routines`]).
    pub(crate) fn declare(module: &mut JITModule, routines: bool) -> Result<ImportIds, Box<ModuleError>> {
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
        let mut trig32 = module.make_signature();
        trig32
            .params
            .extend([AbiParam::new(types::I32), AbiParam::new(types::F32)]);
        trig32.returns.push(AbiParam::new(types::F32));
        let mut trig64 = module.make_signature();
        trig64
            .params
            .extend([AbiParam::new(types::I32), AbiParam::new(types::F64)]);
        trig64.returns.push(AbiParam::new(types::F64));
        let trig_f32 = module
            .declare_function("rfx_trig_f32", Linkage::Import, &trig32)
            .map_err(Box::new)?;
        let trig_f64 = module
            .declare_function("rfx_trig_f64", Linkage::Import, &trig64)
            .map_err(Box::new)?;
        let aot = if routines {
            let ptr = module.target_config().pointer_type();
            let mut unary = module.make_signature();
            unary
                .params
                .extend([AbiParam::new(ptr), AbiParam::new(ptr), AbiParam::new(types::I64)]);
            // Two sources, or one source and two results: three pointers and a count.
            let mut three = unary.clone();
            three.params.insert(0, AbiParam::new(ptr));
            let ids = AotFn::ALL
                .iter()
                .map(|routine| {
                    let sig = if routine.arity() + routine.results() == 3 {
                        &three
                    } else {
                        &unary
                    };
                    module
                        .declare_function(routine.symbol(), Linkage::Import, sig)
                        .map_err(Box::new)
                })
                .collect::<Result<Vec<_>, _>>()?;
            Some(ids)
        } else {
            None
        };
        let aot_one = if routines {
            declare_one_entries(module)?
        } else {
            Vec::new()
        };
        Ok(ImportIds {
            aot,
            aot_one,
            trig_f32,
            trig_f64,
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
            trig_f32: module.declare_func_in_func(self.trig_f32, func),
            trig_f64: module.declare_func_in_func(self.trig_f64, func),
            aot: self.aot.as_ref().map(|ids| {
                ids.iter()
                    .map(|&id| module.declare_func_in_func(id, func))
                    .collect()
            }),
            aot_one: self
                .aot_one
                .iter()
                .map(|id| id.map(|id| module.declare_func_in_func(id, func)))
                .collect(),
            assembled: RefCell::new(Vec::new()),
        }
    }
}

/// Declares the routines' one-element entries ([`AotFn::one`]): `fn(x) -> y` for a unary
/// routine, `fn(a, b) -> y` for a binary one, `fn(x, second) -> first` for `sincos`.
fn declare_one_entries(module: &mut JITModule) -> Result<Vec<Option<FuncId>>, Box<ModuleError>> {
    let ptr = module.target_config().pointer_type();
    AotFn::ALL
        .iter()
        .map(|routine| {
            let Some((symbol, _)) = routine.one() else {
                return Ok(None);
            };
            let ty = if routine.dtype() == rfx_ir::DType::F64 {
                types::F64
            } else {
                types::F32
            };
            let mut sig = module.make_signature();
            sig.params.push(AbiParam::new(ty));
            match routine.computes() {
                Computes::Binary(_) => sig.params.push(AbiParam::new(ty)),
                Computes::SinCos => sig.params.push(AbiParam::new(ptr)),
                Computes::Unary(_) | Computes::Fused => {}
            }
            sig.returns.push(AbiParam::new(ty));
            module
                .declare_function(symbol, Linkage::Import, &sig)
                .map(Some)
                .map_err(Box::new)
        })
        .collect()
}

/// Helper references inside one function.
pub(crate) struct Imports {
    pub(crate) fmodf: FuncRef,
    pub(crate) fmod: FuncRef,
    pub(crate) trig_f32: FuncRef,
    pub(crate) trig_f64: FuncRef,
    /// The tile routines, in [`AotFn::ALL`] order, where the target has them.
    pub(crate) aot: Option<Vec<FuncRef>>,
    /// Their one-element entries, in [`AotFn::ALL`] order (empty without the routines).
    aot_one: Vec<Option<FuncRef>>,
    /// The assembled passes this function calls ([`Imports::assembled_pass`]), defined in the
    /// module when the function is ([`Imports::define_assembled`]).
    assembled: RefCell<Vec<PendingPass>>,
}

/// An assembled pass a function calls: its machine code and the name its calls reference,
/// a placeholder until the pass is declared in the module.
struct PendingPass {
    name: UserExternalNameRef,
    code: Vec<u8>,
    /// A reduction pass, whose signature has the partials' address last.
    reduction: bool,
}

/// The assembled passes a function calls ([`Imports::take_assembled`]).
pub(crate) struct AssembledPasses(Vec<PendingPass>);

impl AssembledPasses {
    /// Defines the passes in `module` and points `func`'s calls at them; before `func` is
    /// compiled.
    pub(crate) fn define(&self, module: &mut JITModule, func: &mut Function) -> Result<(), Box<ModuleError>> {
        let ptr = module.target_config().pointer_type();
        for pass in &self.0 {
            let id = module
                .declare_anonymous_function(&assembled_signature(ptr, pass.reduction))
                .map_err(Box::new)?;
            module
                .define_function_bytes(id, 32, &pass.code, &[])
                .map_err(Box::new)?;
            func.params
                .reset_user_func_name(pass.name, UserExternalName::new(0, id.as_u32()));
        }
        Ok(())
    }
}

impl AssembledPasses {
    /// The passes' machine code as text, for dumps (`rfx dump --stage asm`): each pass's
    /// instructions after a line naming it; empty without passes.
    pub(crate) fn listing(&self) -> String {
        let mut text = String::new();
        for (k, pass) in self.0.iter().enumerate() {
            text += &format!("\n; assembled pass {k} ({} bytes)\n", pass.code.len());
            #[cfg(target_arch = "x86_64")]
            {
                text += &crate::asm::disassemble(&pass.code);
            }
        }
        text
    }
}

/// The namespace of the placeholder names of assembled passes (cranelift-module's functions
/// are namespace 0 and its data objects 1); every one is renamed before the function compiles.
const PENDING_NAMESPACE: u32 = 2;

/// The signature of an assembled pass: `(constants, rows, n)`, System V on every host (its
/// code saves only what System V's callee saves).
/// The signature of an assembled pass: `(constants, rows, n)`, and for a reduction pass
/// ([`crate::asm::assemble_reduction`]) the partials' address last.
fn assembled_signature(ptr: types::Type, reduction: bool) -> Signature {
    let mut sig = Signature::new(CallConv::SystemV);
    sig.params
        .extend([AbiParam::new(ptr), AbiParam::new(ptr), AbiParam::new(types::I64)]);
    if reduction {
        sig.params.push(AbiParam::new(ptr));
    }
    sig
}

impl Imports {
    /// The reference to `routine` in this function, if the tile routines are linked.
    pub(crate) fn routine(&self, routine: AotFn) -> Option<FuncRef> {
        let index = AotFn::ALL.iter().position(|&r| r == routine)?;
        self.aot.as_ref()?.get(index).copied()
    }

    /// A reference to the assembled pass `code` ([`crate::asm`]) in `func`, whose signature is
    /// `(constants, rows, n)`, and `(constants, rows, n, partials)` for a `reduction` pass:
    /// the same reference for the same code.
    pub(crate) fn assembled_pass(
        &self,
        func: &mut Function,
        ptr: types::Type,
        code: Vec<u8>,
        reduction: bool,
    ) -> FuncRef {
        let mut pending = self.assembled.borrow_mut();
        let index = match pending
            .iter()
            .position(|p| p.code == code && p.reduction == reduction)
        {
            Some(index) => index,
            None => {
                let index = pending.len();
                let name = func
                    .declare_imported_user_function(UserExternalName::new(PENDING_NAMESPACE, index as u32));
                pending.push(PendingPass {
                    name,
                    code,
                    reduction,
                });
                index
            }
        };
        let signature = func.import_signature(assembled_signature(ptr, reduction));
        // Called through its absolute address: the JIT's memory provider does not promise to
        // place it within a 32-bit displacement of the caller.
        func.import_function(ExtFuncData {
            name: ExternalName::user(pending[index].name),
            signature,
            colocated: false,
            patchable: false,
        })
    }

    /// The assembled passes this function calls so far, to define once it is built.
    pub(crate) fn take_assembled(&self) -> AssembledPasses {
        AssembledPasses(self.assembled.take())
    }

    /// The reference to `routine`'s one-element entry in this function ([`AotFn::one`]), if
    /// the tile routines are linked and it has one.
    pub(crate) fn routine_one(&self, routine: AotFn) -> Option<FuncRef> {
        let index = AotFn::ALL.iter().position(|&r| r == routine)?;
        self.aot_one.get(index).copied().flatten()
    }
}
