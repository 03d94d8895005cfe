//! LIR (placeholder until its types land).

/// Verification errors (placeholder).
#[derive(Debug)]
pub struct VerifyErrors;

impl std::fmt::Display for VerifyErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("invalid")
    }
}
