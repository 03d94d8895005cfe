//! The system C compiler: which one, whether it builds shared objects, and building and loading
//! one translation unit.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use rfx_lower::BackendError;

use super::BACKEND;

/// The flags every unit is compiled with: C99, optimised, position-independent, a shared
/// object; no contraction into fused multiply-adds and no `errno` for `sqrt`, which the export's
/// numeric guarantees need (docs/export.md). No `-march=native`: the code stays exact and runs
/// on any machine of the architecture.
pub const JIT_FLAGS: &[&str] = &[
    "-std=c99",
    "-O2",
    "-fPIC",
    "-shared",
    "-ffp-contract=off",
    "-fno-math-errno",
];

/// Most bytes of a compiler's stderr kept in an error.
const MAX_MESSAGE: usize = 4000;

/// The C compiler command: a program and the words after it (`$CC` may be `ccache gcc` or
/// `gcc -m64`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Compiler {
    pub(crate) program: String,
    pub(crate) args: Vec<String>,
}

impl Compiler {
    /// `command` split at whitespace; `cc` when it is empty.
    pub(crate) fn parse(command: &str) -> Compiler {
        let mut words = command.split_whitespace().map(str::to_string);
        let program = words.next().unwrap_or_else(|| "cc".to_string());
        Compiler {
            program,
            args: words.collect(),
        }
    }

    /// `$CC`, else `cc`.
    pub(crate) fn from_env() -> Compiler {
        Compiler::parse(&std::env::var("CC").unwrap_or_default())
    }

    /// The command as written, for messages.
    pub(crate) fn describe(&self) -> String {
        std::iter::once(self.program.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Compiles `source_file` (in `dir`, whose headers it includes) into the shared object
    /// `output`. A compiler that cannot be started is [`BackendError::Unavailable`]; one that
    /// fails is [`BackendError::Compile`] with its stderr.
    pub(crate) fn build(&self, dir: &Path, source_file: &Path, output: &Path) -> Result<(), BackendError> {
        let result = Command::new(&self.program)
            .args(&self.args)
            .args(JIT_FLAGS)
            .arg("-I")
            .arg(dir)
            .arg("-o")
            .arg(output)
            .arg(source_file)
            .output();
        let out = result.map_err(|e| BackendError::Unavailable {
            backend: BACKEND,
            reason: format!(
                "cannot run the C compiler `{}` ($CC, else cc): {e}",
                self.describe()
            ),
        })?;
        if out.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let mut message = stderr.trim().to_string();
        if message.len() > MAX_MESSAGE {
            let mut end = MAX_MESSAGE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push_str(" [...]");
        }
        Err(BackendError::Compile {
            backend: BACKEND,
            message: format!("`{}` failed ({}): {message}", self.describe(), out.status),
        })
    }

    /// Whether the compiler builds and `dlopen`s a shared object of the JIT's flags: one tiny
    /// unit, compiled and loaded. `Err` says why not.
    pub(crate) fn probe(&self) -> Result<(), String> {
        let built = build_and_load(
            self,
            &[(
                "rfx_probe.c",
                "int rfx_probe(void);\nint rfx_probe(void) { return 7; }\n",
            )],
        );
        let library = built.map_err(|e| match e {
            BackendError::Unavailable { reason, .. } => reason,
            other => format!(
                "the C compiler `{}` cannot build a shared object: {other}",
                self.describe()
            ),
        })?;
        // SAFETY: `rfx_probe` is defined above with exactly this signature.
        let value = unsafe { library.get::<unsafe extern "C" fn() -> i32>(b"rfx_probe\0") }
            .map(|f| unsafe { f() })
            .map_err(|e| format!("the probe's shared object has no `rfx_probe`: {e}"))?;
        if value == 7 {
            Ok(())
        } else {
            Err(format!("the probe returned {value}, not 7"))
        }
    }
}

/// Writes `files` (`(name, text)`; the last one is the unit to compile, the others headers it
/// includes) to a fresh temporary folder, compiles the unit into a shared object there, loads
/// it, and removes the folder (the loaded object stays mapped).
pub(crate) fn build_and_load(
    compiler: &Compiler,
    files: &[(&str, &str)],
) -> Result<Arc<libloading::Library>, BackendError> {
    let io = |what: &str, e: std::io::Error| BackendError::Compile {
        backend: BACKEND,
        message: format!("{what}: {e}"),
    };
    let dir = tempfile::Builder::new()
        .prefix("rfx-c-")
        .tempdir()
        .map_err(|e| io("creating a temporary folder", e))?;
    let mut unit = None;
    for (name, text) in files {
        let path = dir.path().join(name);
        std::fs::write(&path, text).map_err(|e| io(&format!("writing {}", path.display()), e))?;
        unit = Some(path);
    }
    let Some(unit) = unit else {
        return Err(BackendError::Compile {
            backend: BACKEND,
            message: "no translation unit to compile".to_string(),
        });
    };
    let object = dir.path().join("librfx_jit.so");
    compiler.build(dir.path(), &unit, &object)?;
    // SAFETY: the object was just built from the exported C, which has no initialisers or
    // constructors that run on load (no static objects but `static const` data).
    let library = unsafe { libloading::Library::new(&object) }.map_err(|e| BackendError::Compile {
        backend: BACKEND,
        message: format!("loading {}: {e}", object.display()),
    })?;
    // Unlinking a loaded shared object leaves its mapping in place; a failure to remove the
    // folder only leaves it behind.
    let _ = dir.close();
    Ok(Arc::new(library))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compiler_command_is_split_into_program_and_arguments() {
        assert_eq!(
            Compiler::parse("  ccache  gcc -m64 "),
            Compiler {
                program: "ccache".into(),
                args: vec!["gcc".into(), "-m64".into()]
            }
        );
        assert_eq!(Compiler::parse("").describe(), "cc");
        assert_eq!(Compiler::parse("clang").args, Vec::<String>::new());
    }

    #[test]
    fn a_missing_compiler_is_unavailable() {
        let missing = Compiler::parse("/nonexistent/rfx-no-cc");
        let reason = missing.probe().expect_err("no such compiler");
        assert!(reason.contains("/nonexistent/rfx-no-cc"), "{reason}");
        let err = build_and_load(&missing, &[("u.c", "int f(void) { return 0; }\n")])
            .expect_err("no such compiler");
        assert!(
            matches!(err, BackendError::Unavailable { backend: "c", .. }),
            "{err:?}"
        );
    }
}
