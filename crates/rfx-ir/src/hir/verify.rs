//! Verify.
use super::{Kernel, ValueId};
/// Location.
#[derive(Debug)] pub enum VerifyLocation { /// v
 Value(ValueId) }
/// Err.
#[derive(Debug)] pub struct VerifyError;
/// Errs.
#[derive(Debug)] pub struct VerifyErrors;
/// Verify.
pub fn verify(_k: &Kernel) -> Result<(), VerifyErrors> { Ok(()) }
