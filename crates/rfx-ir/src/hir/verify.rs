//! Verify (placeholder).
use super::{Kernel, ValueId};
/// Location.
#[derive(Debug)] pub enum VerifyLocation { /// v
 Value(ValueId) }
/// Err.
#[derive(Debug)] pub struct VerifyError;
/// Errs.
#[derive(Debug)] pub struct VerifyErrors;
impl std::fmt::Display for VerifyErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("invalid") }
}
/// Verify.
pub fn verify(_k: &Kernel) -> Result<(), VerifyErrors> { Ok(()) }
