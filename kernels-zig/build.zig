//! Builds libcflow_kernels.so: one self-contained shared library for x86-64
//! Linux (glibc 2.28+) holding four kernel variants compiled for four CPU
//! levels (baseline x86-64, x86-64-v3 = AVX2+FMA, x86-64-v3 + AVX-VNNI,
//! x86-64-v4 + AVX512-VNNI)
//! and a baseline root that picks one at run time by cpuid. Nothing is built
//! for the host CPU (`-mcpu=native`).
//!
//!   zig build -Doptimize=ReleaseFast   the shipped library (zig-out/lib)
//!   zig build wasm                     the WebAssembly fallback (zig-out/wasm)
//!   zig build test                     every test, in Debug and ReleaseSafe
//!
//! The wasm fallback is the same root and the same scalar kernel source
//! built for wasm32-freestanding with simd128 (no threads, no mmap, no
//! cpuid: see root.zig); ffi/wasm_backend.ts runs it where FFI is not
//! permitted or no native build fits.

const std = @import("std");

const Variant = enum(u32) { scalar = 1, avx2 = 2, avx512vnni = 3, avxvnni = 4 };

fn variantQuery(v: Variant) std.Target.Query {
    var q = baseQuery();
    switch (v) {
        .scalar => q.cpu_model = .baseline,
        .avx2 => q.cpu_model = .{ .explicit = &std.Target.x86.cpu.x86_64_v3 },
        .avx512vnni => {
            q.cpu_model = .{ .explicit = &std.Target.x86.cpu.x86_64_v4 };
            q.cpu_features_add = std.Target.x86.featureSet(&.{.avx512vnni});
        },
        .avxvnni => {
            q.cpu_model = .{ .explicit = &std.Target.x86.cpu.x86_64_v3 };
            q.cpu_features_add = std.Target.x86.featureSet(&.{.avxvnni});
        },
    }
    return q;
}

fn baseQuery() std.Target.Query {
    return .{
        .cpu_arch = .x86_64,
        .os_tag = .linux,
        .abi = .gnu,
        .glibc_version = .{ .major = 2, .minor = 28, .patch = 0 },
        .cpu_model = .baseline,
    };
}

fn hostRuns(b: *std.Build, v: Variant) bool {
    const host = b.graph.host.result;
    if (host.cpu.arch != .x86_64) return false;
    const has = std.Target.x86.featureSetHas;
    const f = host.cpu.features;
    return switch (v) {
        .scalar => true,
        .avx2 => has(f, .avx2) and has(f, .fma) and has(f, .f16c) and has(f, .bmi2),
        .avx512vnni => has(f, .avx512bw) and has(f, .avx512vl) and has(f, .avx512dq) and has(f, .avx512vnni),
        .avxvnni => hostRuns(b, .avx2) and has(f, .avxvnni),
    };
}

fn variantModule(b: *std.Build, v: Variant, optimize: std.builtin.OptimizeMode) *std.Build.Module {
    const opts = b.addOptions();
    opts.addOption(u32, "variant", @intFromEnum(v));
    const m = b.createModule(.{
        .root_source_file = b.path("src/variant.zig"),
        .target = b.resolveTargetQuery(variantQuery(v)),
        .optimize = optimize,
        .link_libc = true,
        .pic = true,
        .omit_frame_pointer = if (optimize == .ReleaseFast) true else null,
    });
    m.addOptions("variant_options", opts);
    return m;
}

fn rootModule(b: *std.Build, optimize: std.builtin.OptimizeMode) *std.Build.Module {
    const m = b.createModule(.{
        .root_source_file = b.path("src/root.zig"),
        .target = b.resolveTargetQuery(baseQuery()),
        .optimize = optimize,
        .link_libc = true,
        .pic = true,
    });
    for (std.enums.values(Variant)) |v| {
        const obj = b.addObject(.{ .name = b.fmt("cflow_{s}", .{@tagName(v)}), .root_module = variantModule(b, v, optimize) });
        m.addObject(obj);
    }
    return m;
}

fn wasmQuery() std.Target.Query {
    return .{
        .cpu_arch = .wasm32,
        .os_tag = .freestanding,
        .cpu_model = .{ .explicit = &std.Target.wasm.cpu.generic },
        .cpu_features_add = std.Target.wasm.featureSet(&.{ .simd128, .bulk_memory, .nontrapping_fptoint, .sign_ext }),
    };
}

/// cflow_kernels.wasm: root.zig (the same exports) with the scalar variant
/// object, ReleaseFast, single-threaded.
fn wasmModule(b: *std.Build, optimize: std.builtin.OptimizeMode) *std.Build.Step.Compile {
    const target = b.resolveTargetQuery(wasmQuery());
    const opts = b.addOptions();
    opts.addOption(u32, "variant", @intFromEnum(Variant.scalar));
    const kernels = b.createModule(.{
        .root_source_file = b.path("src/variant.zig"),
        .target = target,
        .optimize = optimize,
        .single_threaded = true,
    });
    kernels.addOptions("variant_options", opts);
    const root = b.createModule(.{
        .root_source_file = b.path("src/root.zig"),
        .target = target,
        .optimize = optimize,
        .single_threaded = true,
    });
    root.addObject(b.addObject(.{ .name = "cflow_scalar", .root_module = kernels }));
    const exe = b.addExecutable(.{ .name = "cflow_kernels", .root_module = root });
    exe.entry = .disabled;
    exe.rdynamic = true;
    // A wasm32 address space is 4 GiB; memory grows on demand up to it.
    exe.max_memory = 4 << 30;
    exe.stack_size = 1 << 20;
    return exe;
}

pub fn build(b: *std.Build) void {
    const optimize = b.option(std.builtin.OptimizeMode, "optimize", "Build mode of the library (default ReleaseFast, what ships)") orelse .ReleaseFast;

    const lib = b.addLibrary(.{
        .name = "cflow_kernels",
        .linkage = .dynamic,
        .root_module = rootModule(b, optimize),
    });
    // Export the cf_* functions only (kernels-zig/exports.map).
    lib.setVersionScript(b.path("exports.map"));
    b.installArtifact(lib);

    const wasm_step = b.step("wasm", "Build the WebAssembly fallback into zig-out/wasm/cflow_kernels.wasm (ReleaseFast)");
    const wasm = wasmModule(b, .ReleaseFast);
    wasm_step.dependOn(&b.addInstallArtifact(wasm, .{ .dest_dir = .{ .override = .{ .custom = "wasm" } } }).step);

    const test_step = b.step("test", "Run every Zig test in Debug and ReleaseSafe");
    for ([_]std.builtin.OptimizeMode{ .Debug, .ReleaseSafe }) |mode| {
        const root_tests = b.addTest(.{ .name = b.fmt("root-{s}", .{@tagName(mode)}), .root_module = rootModule(b, mode) });
        test_step.dependOn(&b.addRunArtifact(root_tests).step);
        // The wasm build's expf against this machine's glibc, and the wasm
        // root compiling at all (it is not run here: ffi/wasm_backend_test.ts).
        const expf_tests = b.addTest(.{ .name = b.fmt("expf-{s}", .{@tagName(mode)}), .root_module = b.createModule(.{
            .root_source_file = b.path("src/expf.zig"),
            .target = b.resolveTargetQuery(baseQuery()),
            .optimize = mode,
            .link_libc = true,
        }) });
        test_step.dependOn(&b.addRunArtifact(expf_tests).step);
        test_step.dependOn(&wasmModule(b, mode).step);
        for (std.enums.values(Variant)) |v| {
            if (!hostRuns(b, v)) {
                std.log.warn("skipping {s} kernel tests: this CPU cannot run them", .{@tagName(v)});
                continue;
            }
            const t = b.addTest(.{ .name = b.fmt("{s}-{s}", .{ @tagName(v), @tagName(mode) }), .root_module = variantModule(b, v, mode) });
            test_step.dependOn(&b.addRunArtifact(t).step);
        }
    }
}
