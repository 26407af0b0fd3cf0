//! Builds `cache_locality`, the cache-locality probe run under cachegrind by
//! `bench/cache_locality.ts`. It compiles the real kernel bodies
//! (`kernels-zig/src/kernels.zig`) for one explicit CPU level, never the
//! build host's (`-mcpu=native` is not used):
//!
//!   zig build -Doptimize=ReleaseFast                 AVX2 kernels, x86-64-v3
//!   zig build -Doptimize=ReleaseFast -Dvariant=scalar

const std = @import("std");

const Variant = enum(u32) { scalar = 1, avx2 = 2, avx512vnni = 3 };

pub fn build(b: *std.Build) void {
    const optimize = b.option(std.builtin.OptimizeMode, "optimize", "Build mode (default ReleaseFast)") orelse .ReleaseFast;
    // valgrind 3.19 does not decode AVX-512, so the default is the AVX2 variant.
    const variant = b.option(Variant, "variant", "Kernel variant to compile (default avx2)") orelse .avx2;

    var query: std.Target.Query = .{ .cpu_arch = .x86_64, .os_tag = .linux, .abi = .musl };
    switch (variant) {
        .scalar => query.cpu_model = .baseline,
        .avx2 => query.cpu_model = .{ .explicit = &std.Target.x86.cpu.x86_64_v3 },
        .avx512vnni => {
            query.cpu_model = .{ .explicit = &std.Target.x86.cpu.x86_64_v4 };
            query.cpu_features_add = std.Target.x86.featureSet(&.{.avx512vnni});
        },
    }
    const target = b.resolveTargetQuery(query);

    const opts = b.addOptions();
    opts.addOption(u32, "variant", @intFromEnum(variant));

    // The kernel library's own source, unchanged: the module root is
    // kernels.zig, so its sibling import of abi.zig resolves as in the library.
    const kernels = b.createModule(.{
        .root_source_file = b.path("../../kernels-zig/src/kernels.zig"),
        .target = target,
        .optimize = optimize,
    });
    kernels.addOptions("variant_options", opts);

    const exe = b.addExecutable(.{
        .name = "cache_locality",
        .root_module = b.createModule(.{
            .root_source_file = b.path("main.zig"),
            .target = target,
            .optimize = optimize,
            .omit_frame_pointer = if (optimize == .ReleaseFast) true else null,
        }),
    });
    exe.root_module.addImport("kernels", kernels);
    b.installArtifact(exe);

    const run = b.addRunArtifact(exe);
    run.addArg("verify");
    b.step("verify", "Check the tiled and row-major kernels against an f64 reference").dependOn(&run.step);
}
