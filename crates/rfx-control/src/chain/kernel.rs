//! Ready-made kernels of a [`Chain`]: its traced functions behind a jit, with `q`'s length
//! checked before tracing.

use std::sync::Arc;

use rfx::{CallError, Jit, JitError, KernelFn, Shape, Tensor, TensorType};
use rfx_ir::hir::Kernel;

use super::kinematics::{self, JointInputs};
use super::{Chain, ChainError};
use crate::build::{ControlKernel, func};

/// One output of [`Chain::kernel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChainOutput {
    /// `transform`, `[.., 4, 4]`: [`Chain::fk`].
    Transform,
    /// `pose`, `[.., 7]`: [`Chain::fk_pose`].
    Pose,
    /// `jacobian`, `[.., 6, n]`: [`Chain::jacobian`].
    Jacobian,
}

impl ChainOutput {
    /// The output's name in the kernel.
    pub fn name(self) -> &'static str {
        match self {
            ChainOutput::Transform => "transform",
            ChainOutput::Pose => "pose",
            ChainOutput::Jacobian => "jacobian",
        }
    }
}

/// A chain kernel: input `q` `[.., n]`, the outputs asked for. Tracing it for a `q` whose
/// last axis is not `n` fails with [`CallError::Shape`].
#[derive(Clone, Debug)]
pub struct ChainKernel {
    dof: usize,
    inner: ControlKernel,
}

impl ChainKernel {
    /// The names of the outputs, in order.
    pub fn output_names(&self) -> Vec<&str> {
        self.inner.output_names()
    }
}

impl KernelFn for ChainKernel {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn input_names(&self) -> Vec<String> {
        self.inner.input_names()
    }

    fn trace(&self, types: &[TensorType]) -> Result<Kernel, JitError> {
        if let Some(q) = types.first()
            && q.shape.dims().last() != Some(&self.dof)
        {
            let mut expected = q.shape.dims().to_vec();
            match expected.last_mut() {
                Some(last) => *last = self.dof,
                None => expected.push(self.dof),
            }
            return Err(CallError::Shape {
                name: "q".to_string(),
                expected: Shape::new(expected),
                found: q.shape.clone(),
            }
            .into());
        }
        self.inner.trace(types)
    }
}

impl Chain {
    /// A kernel of `link`'s `outputs` (in that order) from `q` `[.., n]` (f32 or f64; every
    /// leading axis a batch), compiled for the CPU backend; `rfx::jit_with(jit.func().clone(),
    /// config)` compiles it for another.
    pub fn kernel(&self, link: &str, outputs: &[ChainOutput]) -> Result<Jit<ChainKernel>, ChainError> {
        let path = Arc::new(self.path_to(link)?);
        let chain = Arc::new(self.clone());
        let names: Vec<&str> = outputs.iter().map(|o| o.name()).collect();
        let outputs = outputs.to_vec();
        let dof = self.dof();
        let part = func("chain", ["q"], move |[q]: [Tensor; 1]| {
            let inputs = JointInputs::new(q, dof);
            let walk = kinematics::walk(&chain, &path, &inputs);
            outputs
                .iter()
                .map(|output| match output {
                    ChainOutput::Transform => kinematics::fk_matrix(&walk, &inputs),
                    ChainOutput::Pose => kinematics::fk_pose(&walk, &inputs),
                    ChainOutput::Jacobian => kinematics::jacobian(&walk, &inputs),
                })
                .collect()
        });
        let kernel_name = identifier(&format!("chain_{}_{link}", self.name()));
        let inner = ControlKernel::new(&kernel_name, &["q"]).part(part, &names);
        Ok(rfx::jit(ChainKernel { dof, inner }))
    }

    /// [`Chain::kernel`] of `link`'s `transform`.
    pub fn fk_jit(&self, link: &str) -> Result<Jit<ChainKernel>, ChainError> {
        self.kernel(link, &[ChainOutput::Transform])
    }

    /// [`Chain::kernel`] of `link`'s `transform` and `jacobian`.
    pub fn jacobian_jit(&self, link: &str) -> Result<Jit<ChainKernel>, ChainError> {
        self.kernel(link, &[ChainOutput::Transform, ChainOutput::Jacobian])
    }
}

/// `name` with every character outside `[A-Za-z0-9_]` replaced by `_`: URDF names may hold
/// any character, kernel names are identifiers.
fn identifier(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}
