//! Helpers the MIR and LIR interpreters share: input binding, compute dtypes, output arrays.

use super::{InterpError, Mode};
use crate::repeat::{self, KernelLoop, Step};
use crate::semantics::cast;
use crate::{Array, ArrayData, ArrayView, BufId, DType, Scalar, Shape, TensorType};

/// The dtype values of declared dtype `dtype` are held in under `mode`: `Oracle` widens `f32`
/// to `f64`.
pub(super) fn compute_dtype(mode: Mode, dtype: DType) -> DType {
    match (mode, dtype) {
        (Mode::Oracle, DType::F32) => DType::F64,
        _ => dtype,
    }
}

/// How a program's kernels are run over some state (its memory).
pub(super) struct Runner<'a, K, S> {
    /// The kernels, with their names.
    pub(super) kernels: Vec<(&'a str, &'a K)>,
    /// Runs one kernel; `None` when it finds the program inconsistent.
    pub(super) run: &'a dyn Fn(&'a K, &mut S) -> Option<()>,
    /// Reads a loop's one-element `bool` exit flag.
    pub(super) flag: &'a dyn Fn(&S, BufId) -> Option<bool>,
}

impl<'a, K, S> Runner<'a, K, S> {
    /// Runs the kernels in order, repeating the ranges of `loops` ([`repeat::steps`]): a loop
    /// runs its range up to `trips` times and, with an exit flag, stops after an iteration
    /// that leaves the flag `false`. Errors name the kernel or flag where evaluation failed.
    pub(super) fn run(&self, loops: &[KernelLoop], state: &mut S) -> Result<(), InterpError> {
        let plan = repeat::steps(self.kernels.len(), loops).map_err(|e| InterpError::Inconsistent {
            location: format!("loop #{}", e.index()),
        })?;
        self.run_steps(&plan, state)
    }

    fn run_steps(&self, steps: &[Step], state: &mut S) -> Result<(), InterpError> {
        for step in steps {
            match step {
                Step::Kernel(index) => {
                    let done = self.kernels.get(*index).and_then(|&(_, k)| (self.run)(k, state));
                    done.ok_or_else(|| InterpError::Inconsistent {
                        location: match self.kernels.get(*index) {
                            Some((name, _)) => format!("kernel {name}"),
                            None => format!("kernel #{index}"),
                        },
                    })?;
                }
                Step::Loop { spec, body } => {
                    for _ in 0..spec.trips {
                        self.run_steps(body, state)?;
                        if let Some(exit) = spec.exit {
                            let keep = (self.flag)(state, exit).ok_or_else(|| InterpError::Inconsistent {
                                location: format!("exit flag {exit}"),
                            })?;
                            if !keep {
                                break;
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// The program's outputs, `(buffer, its index, its type)` in order, moved out of `memory` (one
/// value vector per buffer) into arrays of their compute dtype.
pub(super) fn take_outputs<'a, B: std::fmt::Display>(
    outputs: impl IntoIterator<Item = (B, usize, &'a TensorType)>,
    memory: &mut [Vec<Scalar>],
    mode: Mode,
) -> Result<Vec<Array>, InterpError> {
    outputs
        .into_iter()
        .map(|(buf, index, ty)| {
            let values = memory.get_mut(index).map(std::mem::take).unwrap_or_default();
            to_array(&ty.shape, compute_dtype(mode, ty.dtype), values).ok_or_else(|| {
                InterpError::Inconsistent {
                    location: buf.to_string(),
                }
            })
        })
        .collect()
}

/// Checks the inputs against the declared `(name, type)` list and converts each to scalars of
/// its compute dtype.
pub(super) fn bind_inputs<'a>(
    declared: impl IntoIterator<Item = (&'a str, &'a TensorType)>,
    inputs: &[ArrayView<'_>],
    mode: Mode,
) -> Result<Vec<Vec<Scalar>>, InterpError> {
    let declared: Vec<_> = declared.into_iter().collect();
    if declared.len() != inputs.len() {
        return Err(InterpError::Arity {
            expected: declared.len(),
            found: inputs.len(),
        });
    }
    let mut bound = Vec::with_capacity(inputs.len());
    for ((name, ty), input) in declared.into_iter().zip(inputs) {
        if input.dtype() != ty.dtype {
            return Err(InterpError::InputDType {
                name: name.to_string(),
                expected: ty.dtype,
                found: input.dtype(),
            });
        }
        if input.shape() != &ty.shape {
            return Err(InterpError::InputShape {
                name: name.to_string(),
                expected: ty.shape.clone(),
                found: input.shape().clone(),
            });
        }
        let to = compute_dtype(mode, ty.dtype);
        let data = input.data();
        bound.push(
            (0..data.len())
                .filter_map(|i| data.get(i))
                .map(|x| cast(x, to))
                .collect(),
        );
    }
    Ok(bound)
}

/// An array of `shape` from scalars that all have dtype `dtype`; `None` if they do not or the
/// count is wrong.
pub(super) fn to_array(shape: &Shape, dtype: DType, values: Vec<Scalar>) -> Option<Array> {
    Array::new(shape.clone(), ArrayData::from_scalars(dtype, values)?).ok()
}

/// The multi-index of `linear` in the row-major space `dims`, written into `out`.
pub(super) fn unravel(dims: &[usize], mut linear: usize, out: &mut [usize]) {
    for (slot, &dim) in out.iter_mut().zip(dims).rev() {
        if dim == 0 {
            *slot = 0;
        } else {
            *slot = linear % dim;
            linear /= dim;
        }
    }
}

/// `sum(idx[d] * strides[d])`.
pub(super) fn offset(idx: &[usize], strides: &[usize]) -> usize {
    idx.iter().zip(strides).map(|(&i, &s)| i * s).sum()
}
