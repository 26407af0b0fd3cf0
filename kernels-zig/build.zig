//! Builds libcflow_kernels.so: one self-contained shared library for Linux
//! (glibc 2.28+) holding the kernel variants of one architecture, each
//! compiled for its CPU level, and a baseline root that picks one at run
//! time. Nothing is built for the host CPU (`-mcpu=native`).
//!
//! - x86-64 (cpuid): baseline x86-64, x86-64-v3 = AVX2+FMA, x86-64-v3 +
//!   AVX-VNNI, x86-64-v4 + AVX512-VNNI.
//! - aarch64 (getauxval(AT_HWCAP)): baseline ARMv8-A, ARMv8-A with Advanced
//!   SIMD kernels, ARMv8.2-A + dotprod.
//!
//!   zig build -Doptimize=ReleaseFast   the shipped library (zig-out/lib), for
//!                                      the host's architecture (-Darch= to
//!                                      choose: x86_64 or aarch64)
//!   zig build wasm                     the WebAssembly fallback (zig-out/wasm)
//!   zig build test                     every test, in Debug and ReleaseSafe;
//!                                      with -fqemu, the other architecture's
//!                                      tests too, under qemu-user
//!                                      (qemu-aarch64 on PATH:
//!                                      scripts/test-zig.sh sets that up);
//!                                      a variant the CPU cannot run is
//!                                      skipped, saying so, except avxvnni on
//!                                      an AVX-512 VNNI CPU: its tests run
//!                                      built with the EVEX form (evexQuery)
//!
//! The wasm fallback is the same root and the same scalar kernel source
//! built for wasm32-freestanding with simd128 (no threads, no mmap, no
//! cpuid: see root.zig); ffi/wasm_backend.ts runs it where FFI is not
//! permitted or no native build fits.

const std = @import("std");

const Variant = enum(u32) { scalar = 1, avx2 = 2, avx512vnni = 3, avxvnni = 4, neon = 5, neon_dotprod = 6 };

const Arch = enum { x86_64, aarch64 };

/// The variants of one architecture's library (src/abi.zig variantsOf).
fn variantsOf(arch: Arch) []const Variant {
    return switch (arch) {
        .x86_64 => &.{ .scalar, .avx2, .avx512vnni, .avxvnni },
        .aarch64 => &.{ .scalar, .neon, .neon_dotprod },
    };
}

/// Where a library or a test is built for: the architecture, and the C
/// library (glibc for what ships; static musl for tests run under qemu-user,
/// which then need no foreign sysroot).
const Platform = struct {
    arch: Arch,
    abi: std.Target.Abi = .gnu,
};

fn variantQuery(p: Platform, v: Variant) std.Target.Query {
    var q = baseQuery(p);
    if (p.arch == .aarch64) {
        switch (v) {
            .scalar, .neon => q.cpu_model = .{ .explicit = &std.Target.aarch64.cpu.generic },
            .neon_dotprod => {
                q.cpu_model = .{ .explicit = &std.Target.aarch64.cpu.generic };
                q.cpu_features_add = std.Target.aarch64.featureSet(&.{ .v8_2a, .dotprod });
            },
            else => unreachable,
        }
        return q;
    }
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
        else => unreachable,
    }
    return q;
}

fn baseQuery(p: Platform) std.Target.Query {
    return .{
        .cpu_arch = switch (p.arch) {
            .x86_64 => .x86_64,
            .aarch64 => .aarch64,
        },
        .os_tag = .linux,
        .abi = p.abi,
        .glibc_version = if (p.abi == .gnu) .{ .major = 2, .minor = 28, .patch = 0 } else null,
        .cpu_model = if (p.arch == .aarch64) .{ .explicit = &std.Target.aarch64.cpu.generic } else .baseline,
    };
}

fn hostArch(b: *std.Build) ?Arch {
    return switch (b.graph.host.result.cpu.arch) {
        .x86_64 => .x86_64,
        .aarch64 => .aarch64,
        else => null,
    };
}

/// Whether the host CPU runs variant v of its own architecture natively.
fn hostRuns(b: *std.Build, v: Variant) bool {
    const host = b.graph.host.result;
    switch (host.cpu.arch) {
        .x86_64 => {
            const has = std.Target.x86.featureSetHas;
            const f = host.cpu.features;
            return switch (v) {
                .scalar => true,
                .avx2 => has(f, .avx2) and has(f, .fma) and has(f, .f16c) and has(f, .bmi2),
                .avx512vnni => has(f, .avx512bw) and has(f, .avx512vl) and has(f, .avx512dq) and has(f, .avx512vnni),
                .avxvnni => hostRuns(b, .avx2) and has(f, .avxvnni),
                .neon, .neon_dotprod => false,
            };
        },
        .aarch64 => {
            const has = std.Target.aarch64.featureSetHas;
            const f = host.cpu.features;
            return switch (v) {
                .scalar => true,
                .neon => has(f, .neon),
                .neon_dotprod => has(f, .neon) and has(f, .dotprod),
                else => false,
            };
        },
        else => return false,
    }
}

/// The `avxvnni` variant's code built with the EVEX form of `vpdpbusd` ymm
/// (AVX-512 VNNI with VL) instead of AVX-VNNI's VEX form: what a CPU with
/// AVX-512 VNNI and without AVX-VNNI (Zen 4, Ice Lake and Sapphire Rapids
/// servers) can run of it. Without the `avxvnni` feature LLVM cannot
/// compress the instruction to its VEX form, which those CPUs lack.
fn evexQuery(p: Platform) std.Target.Query {
    var q = baseQuery(p);
    q.cpu_model = .{ .explicit = &std.Target.x86.cpu.x86_64_v3 };
    q.cpu_features_add = std.Target.x86.featureSet(&.{ .avx512f, .avx512vl, .avx512bw, .avx512vnni });
    return q;
}

fn variantModule(b: *std.Build, p: Platform, v: Variant, optimize: std.builtin.OptimizeMode) *std.Build.Module {
    return variantModuleFor(b, variantQuery(p, v), v, optimize);
}

fn variantModuleFor(b: *std.Build, query: std.Target.Query, v: Variant, optimize: std.builtin.OptimizeMode) *std.Build.Module {
    const opts = b.addOptions();
    opts.addOption(u32, "variant", @intFromEnum(v));
    const m = b.createModule(.{
        .root_source_file = b.path("src/variant.zig"),
        .target = b.resolveTargetQuery(query),
        .optimize = optimize,
        .link_libc = true,
        .pic = true,
        .omit_frame_pointer = if (optimize == .ReleaseFast) true else null,
    });
    m.addOptions("variant_options", opts);
    return m;
}

fn rootModule(b: *std.Build, p: Platform, optimize: std.builtin.OptimizeMode) *std.Build.Module {
    const m = b.createModule(.{
        .root_source_file = b.path("src/root.zig"),
        .target = b.resolveTargetQuery(baseQuery(p)),
        .optimize = optimize,
        .link_libc = true,
        .pic = true,
    });
    for (variantsOf(p.arch)) |v| {
        const obj = b.addObject(.{ .name = b.fmt("cflow_{s}", .{@tagName(v)}), .root_module = variantModule(b, p, v, optimize) });
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
    const arch = b.option(Arch, "arch", "Architecture of the library (default: the host's; x86_64 elsewhere)") orelse hostArch(b) orelse .x86_64;

    const lib = b.addLibrary(.{
        .name = "cflow_kernels",
        .linkage = .dynamic,
        .root_module = rootModule(b, .{ .arch = arch }, optimize),
    });
    // Export the cf_* functions only (kernels-zig/exports.map).
    lib.setVersionScript(b.path(if (arch == .aarch64) "exports_aarch64.map" else "exports.map"));
    b.installArtifact(lib);

    const wasm_step = b.step("wasm", "Build the WebAssembly fallback into zig-out/wasm/cflow_kernels.wasm (ReleaseFast)");
    const wasm = wasmModule(b, .ReleaseFast);
    wasm_step.dependOn(&b.addInstallArtifact(wasm, .{ .dest_dir = .{ .override = .{ .custom = "wasm" } } }).step);

    const test_step = b.step("test", "Run every Zig test in Debug and ReleaseSafe");
    const host_arch = hostArch(b) orelse .x86_64;
    const native: Platform = .{ .arch = host_arch };
    const foreign: Arch = if (host_arch == .x86_64) .aarch64 else .x86_64;
    for ([_]std.builtin.OptimizeMode{ .Debug, .ReleaseSafe }) |mode| {
        // The other architecture's shipped library compiles in every test
        // run, so that its code cannot rot where it cannot run.
        test_step.dependOn(&b.addLibrary(.{
            .name = b.fmt("cflow_kernels_{s}_{s}", .{ @tagName(foreign), @tagName(mode) }),
            .linkage = .dynamic,
            .root_module = rootModule(b, .{ .arch = foreign }, mode),
        }).step);
        if (b.enable_qemu) {
            // Its tests (root and every variant), static musl binaries, run
            // under qemu-user with every CPU feature qemu models.
            const p: Platform = .{ .arch = foreign, .abi = .musl };
            const root_foreign = b.addTest(.{ .name = b.fmt("root-{s}-{s}", .{ @tagName(foreign), @tagName(mode) }), .root_module = rootModule(b, p, mode) });
            test_step.dependOn(&qemuRun(b, root_foreign).step);
            for (variantsOf(foreign)) |v| {
                const t = b.addTest(.{ .name = b.fmt("{s}-{s}", .{ @tagName(v), @tagName(mode) }), .root_module = variantModule(b, p, v, mode) });
                test_step.dependOn(&qemuRun(b, t).step);
            }
        } else if (mode == .Debug) {
            test_step.dependOn(skipNote(b, b.fmt("skipping the {s} tests: run with -fqemu and qemu-{s} on PATH (scripts/test-zig.sh)", .{ @tagName(foreign), @tagName(foreign) })));
        }
        const root_tests = b.addTest(.{ .name = b.fmt("root-{s}", .{@tagName(mode)}), .root_module = rootModule(b, native, mode) });
        test_step.dependOn(&b.addRunArtifact(root_tests).step);
        // The wasm build's expf against this machine's glibc, and the wasm
        // root compiling at all (it is not run here: ffi/wasm_backend_test.ts).
        const expf_tests = b.addTest(.{ .name = b.fmt("expf-{s}", .{@tagName(mode)}), .root_module = b.createModule(.{
            .root_source_file = b.path("src/expf.zig"),
            .target = b.resolveTargetQuery(baseQuery(native)),
            .optimize = mode,
            .link_libc = true,
        }) });
        test_step.dependOn(&b.addRunArtifact(expf_tests).step);
        test_step.dependOn(&wasmModule(b, mode).step);
        for (variantsOf(host_arch)) |v| {
            if (!hostRuns(b, v)) {
                if (v == .avxvnni and hostRuns(b, .avx512vnni)) {
                    // Its code runs here with the EVEX encoding (evexQuery):
                    // every test of the variant, the VEX encoding untested.
                    if (mode == .Debug) test_step.dependOn(skipNote(b, "running the avxvnni kernel tests with the EVEX form of vpdpbusd ymm: this CPU has AVX-512 VNNI, not AVX-VNNI's VEX form"));
                    const t = b.addTest(.{ .name = b.fmt("avxvnni-evex-{s}", .{@tagName(mode)}), .root_module = variantModuleFor(b, evexQuery(native), v, mode) });
                    test_step.dependOn(&b.addRunArtifact(t).step);
                    continue;
                }
                if (mode == .Debug) test_step.dependOn(skipNote(b, b.fmt("skipping {s} kernel tests: this CPU cannot run them", .{@tagName(v)})));
                continue;
            }
            const t = b.addTest(.{ .name = b.fmt("{s}-{s}", .{ @tagName(v), @tagName(mode) }), .root_module = variantModule(b, native, v, mode) });
            test_step.dependOn(&b.addRunArtifact(t).step);
        }
    }
}

/// A step that prints why some tests do not run, when (and only when) the
/// test step runs: a warning at configure time would show in every build.
fn skipNote(b: *std.Build, text: []const u8) *std.Build.Step {
    const Note = struct {
        step: std.Build.Step,
        text: []const u8,
        fn make(step: *std.Build.Step, _: std.Build.Step.MakeOptions) anyerror!void {
            const self: *@This() = @fieldParentPtr("step", step);
            std.debug.print("warning: {s}\n", .{self.text});
        }
    };
    const note = b.allocator.create(Note) catch @panic("OOM");
    note.* = .{
        .step = std.Build.Step.init(.{ .id = .custom, .name = text, .owner = b, .makeFn = Note.make }),
        .text = text,
    };
    return &note.step;
}

/// Runs a foreign test binary under qemu-user (-fqemu) with QEMU_CPU=max, so
/// that every variant's instructions (dotprod, i8mm) exist in the emulated
/// CPU; results come back through the test runner's protocol as natively.
fn qemuRun(b: *std.Build, t: *std.Build.Step.Compile) *std.Build.Step.Run {
    const run = b.addRunArtifact(t);
    run.setEnvironmentVariable("QEMU_CPU", "max");
    return run;
}
