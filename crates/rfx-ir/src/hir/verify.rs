//! The HIR verifier: checks every typing and structural rule and reports all violations.

use std::collections::HashSet;
use std::fmt;

use super::builder::is_identifier;
use super::text::print_kernel;
use super::{Kernel, Loop, Node, Op, ValueId, result_type};
use crate::error::TypeError;

/// Where in a kernel a verification error was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VerifyLocation {
    /// The kernel as a whole (its header).
    Kernel,
    /// The node defining this value.
    Value(ValueId),
    /// The output with this index.
    Output(usize),
}

/// What rule a kernel breaks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VerifyErrorKind {
    /// A node breaks its op's typing rule.
    #[error("{0}")]
    Type(#[from] TypeError),
    /// An operand that names no node.
    #[error("operand {0} is not defined in this kernel")]
    UndefinedValue(ValueId),
    /// An operand defined at or after its use.
    #[error("operand {0} is used before its definition")]
    UseBeforeDefinition(ValueId),
    /// An operand whose own node is invalid, so this node cannot be typed.
    #[error("operand {0} is invalid")]
    InvalidOperand(ValueId),
    /// A kernel, input or output name that is not an identifier.
    #[error("`{0}` is not a valid name")]
    InvalidName(String),
    /// Two inputs with one name.
    #[error("duplicate input name `{0}`")]
    DuplicateInput(String),
    /// Two outputs with one name.
    #[error("duplicate output name `{0}`")]
    DuplicateOutput(String),
    /// An output naming a value that does not exist.
    #[error("output refers to undefined value {0}")]
    OutputUndefined(ValueId),
    /// A kernel with no outputs.
    #[error("the kernel has no outputs")]
    NoOutputs,
    /// Reduction axes not in ascending order.
    #[error("reduction axes must be listed in ascending order")]
    UnsortedAxes,
    /// An error inside the body of the loop at this location; the inner error's location is
    /// in the body.
    #[error("in the loop's body: {0}")]
    InLoopBody(Box<VerifyError>),
    /// An error inside the test of the `while_loop` at this location; the inner error's
    /// location is in the test.
    #[error("in the loop's test: {0}")]
    InLoopTest(Box<VerifyError>),
    /// A loop whose trip count does not fit the `i32` iteration counter of the loop APIs.
    #[error("the loop runs at most {trips} trips, more than the limit of {limit} (an i32 counter)", limit = i32::MAX)]
    LoopTrips {
        /// The loop's trip count.
        trips: u64,
    },
    /// Loops nested inside one another more than [`MAX_LOOP_DEPTH`] deep.
    #[error("loops nested more than {max} deep", max = MAX_LOOP_DEPTH)]
    LoopDepth,
    /// A `loop_output` whose operand is not a loop node.
    #[error("the operand of loop_output, {0}, is not a loop")]
    NotALoop(ValueId),
    /// A `loop_output` reading a carry the loop does not have.
    #[error("loop_output reads carry {index} of a loop with {carries} carries")]
    LoopOutputIndex {
        /// The carry read.
        index: usize,
        /// The loop's carries.
        carries: usize,
    },
}

/// The most loops a kernel may hold nested inside one another (a loop in a loop's body is
/// nested one deeper). Deeper kernels are rejected by the verifier and the parser rather than
/// risking the stack of the recursive passes.
pub const MAX_LOOP_DEPTH: usize = 16;

/// One verification error and where it was found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {kind}", location_name(*location))]
pub struct VerifyError {
    /// Where.
    pub location: VerifyLocation,
    /// What.
    pub kind: VerifyErrorKind,
}

fn location_name(location: VerifyLocation) -> String {
    match location {
        VerifyLocation::Kernel => "kernel".to_string(),
        VerifyLocation::Value(v) => v.to_string(),
        VerifyLocation::Output(i) => format!("output {i}"),
    }
}

/// Every error found in a kernel. `Display` prints the kernel with each error attached below
/// the line it concerns, as `# error: ...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyErrors {
    errors: Vec<VerifyError>,
    annotated: String,
}

impl VerifyErrors {
    /// The errors, in kernel order.
    pub fn errors(&self) -> &[VerifyError] {
        &self.errors
    }
}

impl fmt::Display for VerifyErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.annotated)
    }
}

impl std::error::Error for VerifyErrors {}

/// Checks `kernel` against every HIR rule and returns all violations.
///
/// Rules: operands are defined by earlier nodes; each node's type is the one its op's typing
/// rule ([`super::result_type`]) gives; input and output names are identifiers and unique; at
/// least one output; outputs name existing values; reduction axes are ascending; every type fits
/// in memory (at most `isize::MAX` bytes). A node with an
/// invalid operand is reported once as [`VerifyErrorKind::InvalidOperand`] rather than with a
/// cascade of type errors.
///
/// Loops: a loop's body and test verify on their own (their errors come back wrapped in
/// [`VerifyErrorKind::InLoopBody`] and [`VerifyErrorKind::InLoopTest`] at the loop), its trip
/// count is at most `i32::MAX`, loops nest at most [`MAX_LOOP_DEPTH`] deep, and a
/// `loop_output`'s one operand is a loop with the carry it reads, of the node's type.
pub fn verify(kernel: &Kernel) -> Result<(), VerifyErrors> {
    let errors = kernel_errors(kernel, MAX_LOOP_DEPTH);
    if errors.is_empty() {
        return Ok(());
    }
    let mut annotated = String::new();
    let _ = print_kernel(kernel, &mut annotated, &mut |f, location| {
        for error in errors.iter().filter(|e| e.location == location) {
            writeln!(f, "  # error: {}", error.kind)?;
        }
        Ok(())
    });
    Err(VerifyErrors { errors, annotated })
}

/// Every error of `kernel`, sorted by location, for a kernel whose loops may nest at most
/// `depth_left` deep.
fn kernel_errors(kernel: &Kernel, depth_left: usize) -> Vec<VerifyError> {
    let mut errors = Vec::new();
    if !is_identifier(kernel.name()) {
        errors.push(VerifyError {
            location: VerifyLocation::Kernel,
            kind: VerifyErrorKind::InvalidName(kernel.name().to_string()),
        });
    }
    let mut valid = vec![false; kernel.nodes().len()];
    let mut input_names = HashSet::new();
    for (index, node) in kernel.nodes().iter().enumerate() {
        let value = ValueId::new(index);
        let mut push = |kind| {
            errors.push(VerifyError {
                location: VerifyLocation::Value(value),
                kind,
            })
        };
        if let Op::Input { name } = &node.op {
            if !is_identifier(name) {
                push(VerifyErrorKind::InvalidName(name.clone()));
            } else if !input_names.insert(name.as_str()) {
                push(VerifyErrorKind::DuplicateInput(name.clone()));
            }
        }
        if !crate::shape::fits_in_memory(&node.ty) {
            push(VerifyErrorKind::Type(TypeError::TooLarge {
                ty: node.ty.to_string(),
            }));
            continue;
        }
        if let Op::Reduce { axes, .. } = &node.op
            && axes.windows(2).any(|w| w[0] > w[1])
        {
            push(VerifyErrorKind::UnsortedAxes);
            continue;
        }
        let mut operand_problem = None;
        for &arg in &node.args {
            if arg.index() >= kernel.nodes().len() {
                operand_problem = Some(VerifyErrorKind::UndefinedValue(arg));
            } else if arg.index() >= index {
                operand_problem = Some(VerifyErrorKind::UseBeforeDefinition(arg));
            } else if !valid[arg.index()] {
                operand_problem = Some(VerifyErrorKind::InvalidOperand(arg));
            }
            if operand_problem.is_some() {
                break;
            }
        }
        if let Some(kind) = operand_problem {
            push(kind);
            continue;
        }
        let loop_errors = match &node.op {
            Op::Loop(spec) => loop_errors(spec, depth_left),
            Op::LoopOutput { index } => loop_output_errors(kernel, node, *index),
            _ => Vec::new(),
        };
        if !loop_errors.is_empty() {
            loop_errors.into_iter().for_each(&mut push);
            continue;
        }
        let arg_types = node
            .args
            .iter()
            .map(|a| &kernel.nodes()[a.index()].ty)
            .collect::<Vec<_>>();
        match result_type(&node.op, &arg_types, Some(&node.ty)) {
            Ok(ty) if ty == node.ty => valid[index] = true,
            Ok(ty) => push(VerifyErrorKind::Type(TypeError::ResultType {
                declared: node.ty.to_string(),
                inferred: ty.to_string(),
            })),
            Err(e) => push(VerifyErrorKind::Type(e)),
        }
    }
    if kernel.outputs().is_empty() {
        errors.push(VerifyError {
            location: VerifyLocation::Kernel,
            kind: VerifyErrorKind::NoOutputs,
        });
    }
    let mut output_names = HashSet::new();
    for (index, output) in kernel.outputs().iter().enumerate() {
        let mut push = |kind| {
            errors.push(VerifyError {
                location: VerifyLocation::Output(index),
                kind,
            })
        };
        if !is_identifier(&output.name) {
            push(VerifyErrorKind::InvalidName(output.name.clone()));
        } else if !output_names.insert(output.name.as_str()) {
            push(VerifyErrorKind::DuplicateOutput(output.name.clone()));
        }
        if output.value.index() >= kernel.nodes().len() {
            push(VerifyErrorKind::OutputUndefined(output.value));
        }
    }
    errors.sort_by_key(|e| e.location);
    errors
}

/// The errors of a loop node of its own: too deep, too many trips, and its body's and test's
/// errors. Its typing against the operands is [`result_type`]'s.
fn loop_errors(spec: &Loop, depth_left: usize) -> Vec<VerifyErrorKind> {
    if loop_nesting(spec, depth_left + 1) > depth_left {
        return vec![VerifyErrorKind::LoopDepth];
    }
    let mut errors = Vec::new();
    if spec.trips > i32::MAX as u64 {
        errors.push(VerifyErrorKind::LoopTrips { trips: spec.trips });
    }
    let inner = depth_left.saturating_sub(1);
    for error in kernel_errors(&spec.body, inner) {
        errors.push(VerifyErrorKind::InLoopBody(Box::new(error)));
    }
    for error in spec.cond.iter().flat_map(|cond| kernel_errors(cond, inner)) {
        errors.push(VerifyErrorKind::InLoopTest(Box::new(error)));
    }
    errors
}

/// The loop's breach of the verifier's limits, if any: more than `i32::MAX` trips, or loops
/// nested more than [`MAX_LOOP_DEPTH`] deep counting this one. The builder checks these before
/// adding a loop, so that it never builds a kernel the verifier rejects.
pub(super) fn loop_limit_error(spec: &Loop) -> Option<VerifyErrorKind> {
    if loop_nesting(spec, MAX_LOOP_DEPTH + 1) > MAX_LOOP_DEPTH {
        Some(VerifyErrorKind::LoopDepth)
    } else if spec.trips > i32::MAX as u64 {
        Some(VerifyErrorKind::LoopTrips { trips: spec.trips })
    } else {
        None
    }
}

/// How deep loops nest in `spec` (1 for a loop without loops inside), or `cap` if deeper: the
/// walk never goes more than `cap` levels down.
fn loop_nesting(spec: &Loop, cap: usize) -> usize {
    if cap <= 1 {
        return cap;
    }
    let inside = std::iter::once(&spec.body)
        .chain(&spec.cond)
        .flat_map(Kernel::nodes)
        .filter_map(|node| match &node.op {
            Op::Loop(inner) => Some(loop_nesting(inner, cap - 1)),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    1 + inside
}

/// The errors of a `loop_output` node whose operands are defined and valid: the operand is a
/// loop, the index one of its carries, and the node's type that carry's.
fn loop_output_errors(kernel: &Kernel, node: &Node, index: usize) -> Vec<VerifyErrorKind> {
    let [of] = node.args[..] else {
        // The wrong number of operands is result_type's arity error.
        return Vec::new();
    };
    let spec = match kernel.node(of).map(|n| &n.op) {
        Some(Op::Loop(spec)) => spec,
        _ => return vec![VerifyErrorKind::NotALoop(of)],
    };
    match spec.carry_type(index) {
        None => vec![VerifyErrorKind::LoopOutputIndex {
            index,
            carries: spec.carries,
        }],
        Some(carry) if *carry != node.ty => vec![VerifyErrorKind::Type(TypeError::ResultType {
            declared: node.ty.to_string(),
            inferred: carry.to_string(),
        })],
        Some(_) => Vec::new(),
    }
}
