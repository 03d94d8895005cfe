//! WGSL → validated `naga::Module` → MSL with an explicit binding map.

use naga::back::msl;
use naga::valid::{Capabilities, ModuleInfo, ValidationFlags, Validator};
use rfx_lower::BackendError;

use crate::BACKEND;
use crate::codegen::Shader;

fn compile_error(message: String) -> BackendError {
    BackendError::Compile {
        backend: BACKEND,
        message,
    }
}

/// Parses and validates the generated WGSL. An error here is a code generator bug; the message
/// carries naga's diagnostic and the source.
pub(crate) fn validate(shader: &Shader) -> Result<(naga::Module, ModuleInfo), BackendError> {
    let module = naga::front::wgsl::parse_str(&shader.source).map_err(|e| {
        compile_error(format!(
            "generated WGSL does not parse:\n{}",
            e.emit_to_string(&shader.source)
        ))
    })?;
    let info = Validator::new(ValidationFlags::all(), Capabilities::empty())
        .validate(&module)
        .map_err(|e| {
            compile_error(format!(
                "generated WGSL does not validate:\n{}",
                e.emit_to_string(&shader.source)
            ))
        })?;
    Ok((module, info))
}

/// MSL for every entry point, with each storage buffer at `[[buffer(N)]]` where `N` is its
/// binding (the LIR buffer index). No sizes buffer: the code never asks for an array's length.
pub(crate) fn to_msl(shader: &Shader) -> Result<String, BackendError> {
    let (module, info) = validate(shader)?;
    let mut per_entry_point_map = msl::EntryPointResourceMap::default();
    for kernel in &shader.kernels {
        let mut resources = msl::BindingMap::default();
        for &binding in &kernel.bindings {
            let slot = u8::try_from(binding).map_err(|_| BackendError::Unsupported {
                backend: BACKEND,
                what: rfx_lower::Unsupported::Size {
                    what: "Metal buffer index",
                    size: binding,
                    limit: usize::from(u8::MAX),
                },
            })?;
            resources.insert(
                naga::ResourceBinding {
                    group: 0,
                    binding: u32::from(slot),
                },
                msl::BindTarget {
                    buffer: Some(slot),
                    ..Default::default()
                },
            );
        }
        per_entry_point_map.insert(
            kernel.entry.clone(),
            msl::EntryPointResources {
                resources,
                ..Default::default()
            },
        );
    }
    let options = msl::Options {
        lang_version: (2, 0),
        per_entry_point_map,
        fake_missing_bindings: false,
        ..Default::default()
    };
    let (text, translation) = msl::write_string(&module, &info, &options, &msl::PipelineOptions::default())
        .map_err(|e| compile_error(format!("naga MSL output failed: {e}")))?;
    // naga leaves out an entry point it cannot bind, reporting it here rather than failing.
    for entry in translation.entry_point_names {
        entry.map_err(|e| compile_error(format!("naga MSL output left out a kernel: {e}")))?;
    }
    Ok(text)
}
