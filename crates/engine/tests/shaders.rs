//! CPU-only checks of every WGSL kernel in the engine's registry (`gpu::KERNELS`): it parses
//! and validates with naga (no adapter needed), its declared entry points and storage
//! bindings exist in the WGSL under the same names and numbers, and every member of its
//! params struct sits at the same byte offset in Rust and in WGSL (so two swapped fields of
//! the same size are caught, not just a wrong total size).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use hif8lab_engine::gpu::kernel::{Kernel, ParamsLayout};
use hif8lab_engine::gpu::{KERNELS, QuantParams, histogram, kernel, qdq, scale_update};

fn module(name: &str, src: &str) -> naga::Module {
    let module = naga::front::wgsl::parse_str(src)
        .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(src)));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::default(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(src)));
    module
}

/// (span, [(member name, offset)]) of a WGSL struct.
fn wgsl_struct(module: &naga::Module, name: &str) -> (u32, Vec<(String, u32)>) {
    module
        .types
        .iter()
        .find(|(_, t)| t.name.as_deref() == Some(name))
        .map(|(_, t)| match &t.inner {
            naga::TypeInner::Struct { span, members } => (
                *span,
                members
                    .iter()
                    .map(|m| (m.name.clone().unwrap_or_default(), m.offset))
                    .collect(),
            ),
            _ => panic!("{name} is not a struct"),
        })
        .unwrap_or_else(|| panic!("struct {name} not found"))
}

/// What is wrong between a Rust params layout and the WGSL struct of the same name.
fn layout_mismatches(module: &naga::Module, layout: &ParamsLayout) -> Vec<String> {
    let (span, members) = wgsl_struct(module, layout.wgsl_struct);
    let mut wrong = Vec::new();
    if span as usize != layout.size {
        wrong.push(format!("size: WGSL {span}, Rust {}", layout.size));
    }
    for (name, offset) in &members {
        if name.starts_with('_') {
            continue;
        }
        match layout.members.iter().find(|(n, _)| n == name) {
            None => wrong.push(format!("member {name} is not declared in Rust")),
            Some((_, rust)) if *rust != *offset as usize => {
                wrong.push(format!("member {name}: WGSL offset {offset}, Rust {rust}"))
            }
            Some(_) => {}
        }
    }
    for (name, _) in layout.members {
        if !members.iter().any(|(n, _)| n == name) {
            wrong.push(format!("member {name} is not in WGSL"));
        }
    }
    wrong
}

/// Storage/uniform bindings of group 0 in the module: (binding, variable name).
fn wgsl_bindings(module: &naga::Module) -> Vec<(u32, String)> {
    let mut v: Vec<(u32, String)> = module
        .global_variables
        .iter()
        .filter_map(|(_, g)| {
            let b = g.binding.as_ref()?;
            (b.group == 0 && b.binding > 0).then(|| (b.binding, g.name.clone().unwrap_or_default()))
        })
        .collect();
    v.sort();
    v
}

fn check_kernel(k: &Kernel) -> naga::Module {
    let m = module(k.name, &k.source());
    let mismatches = layout_mismatches(&m, &k.params);
    assert!(mismatches.is_empty(), "{}: {mismatches:?}", k.name);
    let declared: Vec<(u32, String)> = k
        .bindings
        .iter()
        .map(|(b, n)| (*b, (*n).to_owned()))
        .collect();
    assert_eq!(wgsl_bindings(&m), declared, "{}: bindings", k.name);
    for entry in k.entries {
        assert!(
            m.entry_points.iter().any(|e| e.name == *entry),
            "{}: entry point {entry} missing",
            k.name
        );
    }
    assert_eq!(
        m.entry_points.len(),
        k.entries.len(),
        "{}: every entry point is declared",
        k.name
    );
    assert!(
        k.wgsl
            .lines()
            .next()
            .unwrap()
            .starts_with(&format!("// {}.wgsl", k.name)),
        "{}: header comment",
        k.name
    );
    if k.common.contains(&kernel::Snippet::Quant) {
        let quant = hif8lab_engine::gpu::QUANT_PARAMS;
        assert!(
            layout_mismatches(&m, &quant).is_empty(),
            "{}: QuantParams",
            k.name
        );
        assert_eq!(quant.size, size_of::<QuantParams>());
    }
    m
}

#[test]
fn every_registered_kernel_validates_and_matches_its_declaration() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shaders");
    let on_disk = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "wgsl")
        })
        .count();
    assert_eq!(KERNELS.len(), on_disk, "every shaders/*.wgsl is registered");
    for k in KERNELS {
        check_kernel(k);
    }
    // The histogram's layout constants are the scaling crate's.
    use hif8lab_scaling::stats::{HIST_BINS, HIST_HI, HIST_LO};
    for line in [
        format!("const LO: i32 = {HIST_LO};"),
        format!("const HI: i32 = {HIST_HI};"),
        format!("const BINS: u32 = {HIST_BINS}u;"),
        format!("const HEAD: u32 = {}u;", histogram::HEAD),
        format!("const WORDS: u32 = {}u;", histogram::WORDS),
    ] {
        assert!(
            histogram::WGSL.contains(&line),
            "histogram.wgsl lacks `{line}`"
        );
    }
    let m = module("scale_update", &scale_update::KERNEL.source());
    assert_eq!(
        wgsl_struct(&m, "EstimatorDesc").0 as usize,
        size_of::<scale_update::EstimatorDesc>()
    );
}

#[test]
fn swapped_params_members_are_caught() {
    // Two members of the same size swapped in WGSL: the total size still matches, the
    // offset check does not.
    let k = qdq::KERNEL;
    let swapped = k.source().replacen(
        "n: u32,\n    scale_index: u32,",
        "scale_index: u32,\n    n: u32,",
        1,
    );
    assert_ne!(swapped, k.source(), "the fixture edit applies");
    let m = module("qdq swapped", &swapped);
    let wrong = layout_mismatches(&m, &k.params);
    assert_eq!(wrong.len(), 2, "{wrong:?}");
    assert!(wrong[0].contains("offset"), "{wrong:?}");
}

#[test]
fn a_broken_shader_is_rejected() {
    // The validation above can fail: a type error must be caught.
    let broken = qdq::WGSL.replace("out[i] = fake_quant", "out[i] = 1u + fake_quant");
    let src = kernel::source(&broken, &[kernel::Snippet::Quant]);
    let parsed = naga::front::wgsl::parse_str(&src);
    assert!(parsed.is_err(), "type error must not parse");
}

/// `bitcast<f32>(X)` where X is a literal or an UPPER_CASE constant: a constant expression,
/// which browsers' WGSL compiler (Tint) rejects when it is a NaN or an infinity.
fn const_f32_bitcasts(src: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (i, _) in src.match_indices("bitcast<f32>(") {
        let rest = &src[i + "bitcast<f32>(".len()..];
        let arg = rest.split(')').next().unwrap_or("").trim();
        let literal = arg.starts_with("0x") || arg.chars().all(|c| c.is_ascii_digit() || c == 'u');
        let constant = !arg.is_empty()
            && arg
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if literal || constant {
            found.push(format!("bitcast<f32>({arg})"));
        }
    }
    found
}

#[test]
fn shader_sources_avoid_const_nan_inf() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shaders");
    let mut files = vec![
        dir.join("common/quant.wgsl"),
        dir.join("common/reduce.wgsl"),
    ];
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "wgsl") {
            files.push(p);
        }
    }
    assert!(files.len() > 10, "shaders not found in {}", dir.display());
    for f in &files {
        let src = std::fs::read_to_string(f).unwrap();
        let bad = const_f32_bitcasts(&src);
        assert!(bad.is_empty(), "{}: {bad:?}", f.display());
    }
    // The check itself can fail.
    assert_eq!(
        const_f32_bitcasts(
            "let a = bitcast<f32>(0xff800000u); let b = bitcast<f32>(F32_QNAN_BITS); let c = bitcast<f32>(x);"
        ),
        ["bitcast<f32>(0xff800000u)", "bitcast<f32>(F32_QNAN_BITS)"]
    );
}
