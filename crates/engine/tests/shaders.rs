//! CPU-only checks of every WGSL kernel: it parses and validates with naga (no adapter
//! needed), and each params struct mirrored in WGSL has the size of its Rust twin.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use hif8lab_engine::gpu::{
    QuantParams, adamw, amax, attention, copy, cross_entropy, elementwise, embedding, histogram,
    kernel, matmul, qdq, quant_stats, rmsnorm, rope, scale_update, ste_mask, sum_squares, swiglu,
};

fn module(name: &str, wgsl: &str, common: bool) -> naga::Module {
    let src = kernel::source(wgsl, common);
    let module = naga::front::wgsl::parse_str(&src)
        .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(&src)));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::default(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(&src)));
    module
}

fn struct_size(module: &naga::Module, name: &str) -> u32 {
    module
        .types
        .iter()
        .find(|(_, t)| t.name.as_deref() == Some(name))
        .map(|(_, t)| match t.inner {
            naga::TypeInner::Struct { span, .. } => span,
            _ => panic!("{name} is not a struct"),
        })
        .unwrap_or_else(|| panic!("struct {name} not found"))
}

#[test]
fn every_kernel_validates_and_params_match_rust() {
    let cases: [(&str, &str, bool, &str, usize); 17] = [
        (
            "histogram",
            histogram::WGSL,
            false,
            "HistParams",
            size_of::<histogram::HistParams>(),
        ),
        (
            "ste_mask",
            ste_mask::WGSL,
            false,
            "SteParams",
            size_of::<ste_mask::SteParams>(),
        ),
        (
            "embedding",
            embedding::WGSL,
            false,
            "EmbeddingParams",
            size_of::<embedding::EmbeddingParams>(),
        ),
        (
            "rmsnorm",
            rmsnorm::WGSL,
            false,
            "NormParams",
            size_of::<rmsnorm::NormParams>(),
        ),
        (
            "rope",
            rope::WGSL,
            false,
            "RopeParams",
            size_of::<rope::RopeParams>(),
        ),
        (
            "attention",
            attention::WGSL,
            false,
            "AttentionParams",
            size_of::<attention::AttentionParams>(),
        ),
        (
            "swiglu",
            swiglu::WGSL,
            false,
            "SwigluParams",
            size_of::<swiglu::SwigluParams>(),
        ),
        (
            "cross_entropy",
            cross_entropy::WGSL,
            false,
            "CeParams",
            size_of::<cross_entropy::CeParams>(),
        ),
        (
            "elementwise",
            elementwise::WGSL,
            false,
            "ElementwiseParams",
            size_of::<elementwise::ElementwiseParams>(),
        ),
        (
            "sum_squares",
            sum_squares::WGSL,
            false,
            "SumSquaresParams",
            size_of::<sum_squares::SumSquaresParams>(),
        ),
        (
            "adamw",
            adamw::WGSL,
            false,
            "AdamParams",
            size_of::<adamw::AdamParams>(),
        ),
        (
            "copy",
            copy::WGSL,
            false,
            "CopyParams",
            size_of::<copy::CopyParams>(),
        ),
        (
            "qdq",
            qdq::WGSL,
            true,
            "QdqParams",
            size_of::<qdq::QdqParams>(),
        ),
        (
            "amax",
            amax::WGSL,
            false,
            "AmaxParams",
            size_of::<amax::AmaxParams>(),
        ),
        (
            "quant_stats",
            quant_stats::WGSL,
            true,
            "StatsParams",
            size_of::<quant_stats::StatsParams>(),
        ),
        (
            "scale_update",
            scale_update::WGSL,
            true,
            "UpdateParams",
            size_of::<scale_update::UpdateParams>(),
        ),
        (
            "matmul",
            matmul::WGSL,
            true,
            "MatmulParams",
            size_of::<matmul::MatmulParams>(),
        ),
    ];
    for (name, wgsl, common, params, rust_size) in cases {
        let m = module(name, wgsl, common);
        assert_eq!(
            struct_size(&m, params) as usize,
            rust_size,
            "{name}: {params}"
        );
        assert!(
            wgsl.lines()
                .next()
                .unwrap()
                .starts_with(&format!("// {name}.wgsl")),
            "{name}: header comment"
        );
        if common {
            assert_eq!(
                struct_size(&m, "QuantParams") as usize,
                size_of::<QuantParams>()
            );
        }
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
    let m = module("scale_update", scale_update::WGSL, true);
    assert_eq!(
        struct_size(&m, "EstimatorDesc") as usize,
        size_of::<scale_update::EstimatorDesc>()
    );
}

#[test]
fn a_broken_shader_is_rejected() {
    // The validation above can fail: a type error must be caught.
    let broken = qdq::WGSL.replace("out[i] = fake_quant", "out[i] = 1u + fake_quant");
    let src = kernel::source(&broken, true);
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
    let mut files = vec![dir.join("common/quant.wgsl")];
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
