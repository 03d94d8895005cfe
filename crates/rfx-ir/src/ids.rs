//! Typed ids shared by the IR levels.
//!
//! Ids are dense `u32` indices into one arena (a program's buffer list, a kernel's body or slot
//! list), each printed with a stable prefix so dumps read the same from run to run.

use std::fmt;

/// Defines a typed `u32` index with `new(usize)`, `index()` and a prefixed `Display`.
macro_rules! typed_id {
    ($(#[$meta:meta])* $name:ident, $prefix:literal) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
        )]
        pub struct $name(u32);

        impl $name {
            /// The id of entry number `index` (saturating at `u32::MAX`, which no arena reaches).
            pub fn new(index: usize) -> $name {
                $name(u32::try_from(index).unwrap_or(u32::MAX))
            }

            /// The index of the entry this id names.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

pub(crate) use typed_id;

typed_id!(
    /// A buffer of a MIR or LIR program: the index into the program's buffer list. Prints as
    /// `buf3`.
    BufId,
    "buf"
);

/// `true` for names the text formats can print and read back: `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Writes `items` separated by `", "`.
pub(crate) fn write_list<T: fmt::Display>(f: &mut impl fmt::Write, items: &[T]) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

/// Writes `[a,b,c]` as shapes print (no spaces).
pub(crate) fn write_index_list(f: &mut impl fmt::Write, items: &[usize]) -> fmt::Result {
    f.write_str("[")?;
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(",")?;
        }
        write!(f, "{item}")?;
    }
    f.write_str("]")
}
