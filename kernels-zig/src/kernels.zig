//! Kernel bodies, written once and compiled once per ISA variant.
//!
//! `variant.zig` instantiates this file once per variant of the library's
//! architecture, as separate objects, each built for its own CPU level:
//! x86-64 scalar, AVX2+FMA, AVX2+AVX-VNNI and AVX-512BW+VNNI; aarch64
//! scalar, Advanced SIMD (NEON) and NEON with SDOT (dotprod).
//! The `scalar` namespace below is the reference every SIMD path is tested
//! against: integer block dot products must match it exactly, float results
//! within a small relative error (only the summation order differs).
//!
//! Callers (the library root) have validated every length already; the
//! functions here assert their preconditions again and never allocate.

const std = @import("std");
const builtin = @import("builtin");
const abi = @import("abi.zig");
const options = @import("variant_options");

const assert = std.debug.assert;
const qk = abi.qk;
const BlockQ8_0 = abi.BlockQ8_0;
const BlockQ4_0 = abi.BlockQ4_0;

pub const Variant = abi.Variant;
pub const variant: Variant = @enumFromInt(options.variant);

/// The wasm32 build compiles the scalar variant of this file (`zig build
/// wasm`): the same float loops in the same order, so the same float
/// results; only the exact integer block dots use simd128 (`wasmDotQ*`).
pub const is_wasm = builtin.cpu.arch == .wasm32;

comptime {
    if (is_wasm) assert(variant == .scalar);
}

/// e^x. Natively `@exp`, which calls the process's `expf` (glibc's, under
/// Deno). In wasm `@exp` would call compiler_rt's, a different algorithm;
/// `expf.zig` is a port of glibc's, bit-identical to it. The x86 SIMD
/// variants (FMA, as glibc's x86-64 FMA build that the port equals) run the
/// port, lane-parallel on vectors (`expfVec`) instead of one libm call per
/// lane, and on single values too, so that a test binary (where `@exp`
/// resolves to compiler_rt's expf) checks what ships.
pub inline fn exp(x: anytype) @TypeOf(x) {
    const port = @import("expf.zig");
    if ((is_wasm or vec_expf) and @TypeOf(x) == f32) return port.expf(x);
    if (vec_expf and @typeInfo(@TypeOf(x)) == .vector and @typeInfo(@TypeOf(x)).vector.child == f32) {
        return port.expfVec(@typeInfo(@TypeOf(x)).vector.len, x);
    }
    return @exp(x);
}

const vec_expf = switch (variant) {
    .avx2, .avxvnni, .avx512vnni => true,
    else => false,
};

/// The vector ISA of this variant's float and row kernels: `avxvnni` is the
/// AVX2 variant with 256-bit `vpdpbusd` for its integer dot products;
/// `neon_dotprod` the NEON variant with `sdot`.
pub const Isa = enum { scalar, avx2, avx512, neon };
pub const isa: Isa = switch (variant) {
    .scalar => .scalar,
    .avx2, .avxvnni => .avx2,
    .avx512vnni => .avx512,
    .neon, .neon_dotprod => .neon,
};

/// f32 lanes used by the float kernels of this variant.
pub const lanes: usize = switch (isa) {
    .scalar => 1,
    .avx2 => 8,
    .avx512 => 16,
    .neon => 4,
};

const is_arm = builtin.cpu.arch == .aarch64;

comptime {
    const f = builtin.cpu.features;
    if (is_arm) {
        const has = std.Target.aarch64.featureSetHas;
        switch (variant) {
            .scalar => {},
            .neon => assert(has(f, .neon)),
            .neon_dotprod => assert(has(f, .neon) and has(f, .dotprod)),
            .avx2, .avxvnni, .avx512vnni => unreachable,
        }
    } else if (!is_wasm) {
        const has = std.Target.x86.featureSetHas;
        switch (variant) {
            .scalar => {},
            .avx2 => assert(has(f, .avx2) and has(f, .fma) and has(f, .f16c)),
            .avx512vnni => assert(has(f, .avx512bw) and has(f, .avx512vl) and has(f, .avx512vnni)),
            // `vpdpbusd` on ymm: AVX-VNNI's VEX form (what ships), or the
            // EVEX form of AVX-512 VNNI with VL (the build's `avxvnni-evex`
            // tests, on CPUs that have AVX-512 VNNI and not AVX-VNNI).
            .avxvnni => assert(has(f, .avx2) and has(f, .fma) and has(f, .f16c) and
                (has(f, .avxvnni) or (has(f, .avx512vnni) and has(f, .avx512vl)))),
            .neon, .neon_dotprod => unreachable,
        }
    }
}

// ---------------------------------------------------------------------------
// Scalar reference. Plain loops, sequential f32 accumulation. The scalar
// variant exports exactly these.
// ---------------------------------------------------------------------------

/// Integer dot of 32 weights and 32 activations with simd128 (wasm32 only):
/// i8 x i8 products widened to i16 are exact and pairwise sums into i32
/// lanes (`i32x4.dot_i16x8_s`) are exact, so the result is the scalar loop's
/// in any order.
pub inline fn wasmDotQ8_0(w: *const [32]i8, x: *const [32]i8) i32 {
    const a: @Vector(32, i16) = @as(@Vector(32, i8), w.*);
    const b: @Vector(32, i16) = @as(@Vector(32, i8), x.*);
    const p: @Vector(32, i32) = @as(@Vector(32, i32), a) * @as(@Vector(32, i32), b);
    return @reduce(.Add, p);
}

pub inline fn wasmDotQ4_0(w: *const [16]u8, x: *const [32]i8) i32 {
    const q: @Vector(16, u8) = w.*;
    const lo: @Vector(16, i16) = @as(@Vector(16, i16), q & @as(@Vector(16, u8), @splat(15))) - @as(@Vector(16, i16), @splat(8));
    const hi: @Vector(16, i16) = @as(@Vector(16, i16), q >> @splat(4)) - @as(@Vector(16, i16), @splat(8));
    const xv: @Vector(32, i8) = x.*;
    const xl: @Vector(16, i16) = std.simd.extract(xv, 0, 16);
    const xh: @Vector(16, i16) = std.simd.extract(xv, 16, 16);
    const p = @as(@Vector(16, i32), lo) * @as(@Vector(16, i32), xl) + @as(@Vector(16, i32), hi) * @as(@Vector(16, i32), xh);
    return @reduce(.Add, p);
}

/// Rounds to the nearest integer, ties to even (x86's `_MM_ROUND_NEAREST`),
/// for |v| <= 2^22: adding and taking away 1.5 * 2^23 leaves the integer
/// part the default rounding mode gave. Activations use it with
/// `127 / amax`, as ggml's x86 `quantize_row_q8_0` does (its scalar
/// `_ref` rounds ties away from zero and multiplies by 1 / d).
pub inline fn roundEven(v: anytype) @TypeOf(v) {
    const magic: @TypeOf(v) = if (@typeInfo(@TypeOf(v)) == .vector) @splat(12582912.0) else 12582912.0;
    return (v + magic) - magic;
}

pub const scalar = struct {
    pub fn blockDotQ8_0(w: *const BlockQ8_0, x: *const BlockQ8_0) i32 {
        if (is_wasm) return wasmDotQ8_0(&w.qs, &x.qs);
        var sum: i32 = 0;
        for (0..qk) |j| sum += @as(i32, w.qs[j]) * @as(i32, x.qs[j]);
        return sum;
    }

    pub fn blockDotQ4_0(w: *const BlockQ4_0, x: *const BlockQ8_0) i32 {
        if (is_wasm) return wasmDotQ4_0(&w.qs, &x.qs);
        var sum: i32 = 0;
        for (0..qk / 2) |j| {
            const lo: i32 = @as(i32, w.qs[j] & 0x0f) - 8;
            const hi: i32 = @as(i32, w.qs[j] >> 4) - 8;
            sum += lo * @as(i32, x.qs[j]) + hi * @as(i32, x.qs[j + qk / 2]);
        }
        return sum;
    }

    pub fn dotQ8_0(w: []const BlockQ8_0, x: []const BlockQ8_0) f32 {
        assert(w.len == x.len);
        var acc: f32 = 0;
        for (w, x) |*wb, *xb| {
            const scale = abi.f16ToF32(wb.d) * abi.f16ToF32(xb.d);
            acc += @as(f32, @floatFromInt(blockDotQ8_0(wb, xb))) * scale;
        }
        return acc;
    }

    pub fn dotQ4_0(w: []const BlockQ4_0, x: []const BlockQ8_0) f32 {
        assert(w.len == x.len);
        var acc: f32 = 0;
        for (w, x) |*wb, *xb| {
            const scale = abi.f16ToF32(wb.d) * abi.f16ToF32(xb.d);
            acc += @as(f32, @floatFromInt(blockDotQ4_0(wb, xb))) * scale;
        }
        return acc;
    }

    /// ggml's x86 `quantize_row_q8_0` (scale `amax / 127`, quants `x * (127
    /// / amax)` rounded to nearest, ties to even), with a clamp to [-127,
    /// 127]: what llama.cpp runs on x86 for activations. Returns false,
    /// leaving the block unspecified, when the block is not finite.
    pub fn quantizeBlockQ8_0(x: *const [qk]f32, out: *BlockQ8_0) bool {
        var amax: f32 = 0;
        for (x) |v| {
            if (!std.math.isFinite(v)) return false;
            amax = @max(amax, @abs(v));
        }
        const d = amax / 127.0;
        const id: f32 = if (amax != 0) 127.0 / amax else 0;
        out.d = abi.f32ToF16(d);
        for (x, 0..) |v, j| {
            // For a block of tiny values 127/amax overflows; a non-finite
            // product gives 0 (the scale is 0 too).
            const p = v * id;
            const r = if (std.math.isFinite(p)) std.math.clamp(roundEven(p), -127.0, 127.0) else 0;
            out.qs[j] = @intFromFloat(r);
        }
        return true;
    }
};

// ---------------------------------------------------------------------------
// Integer block dot products (block_dots.zig).
// ---------------------------------------------------------------------------

const bd = @import("block_dots.zig");
pub const @"llvm.x86.avx512.vpdpbusd.512" = bd.@"llvm.x86.avx512.vpdpbusd.512";
pub const @"llvm.x86.avx512.vpdpbusd.256" = bd.@"llvm.x86.avx512.vpdpbusd.256";
pub const @"llvm.x86.avx2.pmadd.ub.sw" = bd.@"llvm.x86.avx2.pmadd.ub.sw";
pub const @"llvm.x86.avx2.pmadd.wd" = bd.@"llvm.x86.avx2.pmadd.wd";
pub const @"llvm.x86.avx2.psign.b" = bd.@"llvm.x86.avx2.psign.b";
pub const @"llvm.aarch64.neon.sdot.v4i32.v16i8" = bd.@"llvm.aarch64.neon.sdot.v4i32.v16i8";
pub const lanesQ4_0x2 = bd.lanesQ4_0x2;
pub const lanesQ4_0x1Vnni = bd.lanesQ4_0x1Vnni;
pub const lanesQ8_0x2 = bd.lanesQ8_0x2;
pub const lanesQ8_0x1Vnni = bd.lanesQ8_0x1Vnni;
pub const lanesQ4_0x1Avx2 = bd.lanesQ4_0x1Avx2;
pub const lanesQ8_0x1Avx2 = bd.lanesQ8_0x1Avx2;
pub const dot4 = bd.dot4;
pub const lanesQ4_0x1Neon = bd.lanesQ4_0x1Neon;
pub const lanesQ8_0x1Neon = bd.lanesQ8_0x1Neon;
pub const blockDotsQ4_0 = bd.blockDotsQ4_0;
pub const blockDotsQ8_0 = bd.blockDotsQ8_0;
pub const dotQ4_0 = bd.dotQ4_0;
pub const dotQ8_0 = bd.dotQ8_0;
pub const matvecRowsQ4_0 = bd.matvecRowsQ4_0;
pub const matvecRowsQ8_0 = bd.matvecRowsQ8_0;

// ---------------------------------------------------------------------------
// Tiled matrices (tiles.zig).
// ---------------------------------------------------------------------------

const tiles = @import("tiles.zig");
pub const tile_rows_max = tiles.tile_rows_max;
pub const tile_cols_max = tiles.tile_cols_max;
pub const tile_header_bytes = tiles.tile_header_bytes;
pub const TileType = tiles.TileType;
pub const tileBytes = tiles.tileBytes;
pub const stripeBytes = tiles.stripeBytes;
pub const tileStripe = tiles.tileStripe;

/// Little-endian reads of unaligned bytes (records, ActRows).
pub inline fn readU32(p: [*]const u8) u32 {
    return std.mem.readInt(u32, p[0..4], .little);
}

pub inline fn readF32(p: [*]const u8) f32 {
    return @bitCast(readU32(p));
}

pub inline fn readI32(p: [*]const u8) i32 {
    return @bitCast(readU32(p));
}

// ---------------------------------------------------------------------------
// Activation quantization (quantize_q8_0.zig).
// ---------------------------------------------------------------------------

const quantize = @import("quantize_q8_0.zig");
pub const quantizeQ8_0 = quantize.quantizeQ8_0;
pub const maxNoNan = quantize.maxNoNan;
pub const maxLaneNoNan = quantize.maxLaneNoNan;

// ---------------------------------------------------------------------------
// Float kernels and the streaming read (float_kernels.zig).
// ---------------------------------------------------------------------------

const fk = @import("float_kernels.zig");
pub const rmsNorm = fk.rmsNorm;
pub const softmax = fk.softmax;
pub const Argmax = fk.Argmax;
pub const argmax = fk.argmax;
pub const rope = fk.rope;
pub const ropeAngles = fk.ropeAngles;
pub const ropeTable = fk.ropeTable;
pub const Gate = fk.Gate;
pub const gatedMul = fk.gatedMul;
pub const streamRead = fk.streamRead;

// ---------------------------------------------------------------------------
// Test helpers, shared by the tests of every kernel file (block_dots.zig,
// tiles.zig, panels.zig, float_kernels.zig, attention_test.zig).
// ---------------------------------------------------------------------------

const testing = std.testing;

pub fn randomQ8Blocks(rng: std.Random, out: []BlockQ8_0, full_range: bool) void {
    for (out) |*b| {
        b.d = abi.f32ToF16(rng.float(f32) * 0.1 + 0.001);
        for (&b.qs) |*q| {
            q.* = if (full_range) rng.int(i8) else rng.intRangeAtMost(i8, -127, 127);
        }
    }
}

pub fn randomQ4Blocks(rng: std.Random, out: []BlockQ4_0) void {
    for (out) |*b| {
        b.d = abi.f32ToF16(rng.float(f32) * 0.1 + 0.001);
        for (&b.qs) |*q| q.* = rng.int(u8);
    }
}

/// |expected - actual| <= rel * magnitude + 1e-12, where magnitude is the
/// larger of the two values, or for sums the sum of the absolute terms
/// (reordering a sum can only move it by a multiple of that).
pub fn expectClose(expected: f32, actual: f32, rel: f32) !void {
    return expectCloseMag(expected, actual, rel, @max(@abs(expected), @abs(actual)));
}

pub fn expectCloseMag(expected: f32, actual: f32, rel: f32, magnitude: f32) !void {
    const diff = @abs(expected - actual);
    if (diff > rel * magnitude + 1e-12) {
        std.debug.print("expected {d}, got {d} (diff {d})\n", .{ expected, actual, diff });
        return error.TestExpectedApproxEq;
    }
}

/// Sum over all products of |w_j x_j| (scaled): the textbook bound on how
/// far any summation order can move a dot product is a multiple of this.
pub fn absTermsQ8(w: []const BlockQ8_0, x: []const BlockQ8_0) f32 {
    var m: f32 = 0;
    for (w, x) |*a, *b| {
        var t: i32 = 0;
        for (a.qs, b.qs) |p, q| t += @intCast(@abs(@as(i32, p) * q));
        m += @as(f32, @floatFromInt(t)) * abi.f16ToF32(a.d) * abi.f16ToF32(b.d);
    }
    return m;
}

pub fn absTermsQ4(w: []const BlockQ4_0, x: []const BlockQ8_0) f32 {
    var m: f32 = 0;
    for (w, x) |*a, *b| {
        var t: i32 = 0;
        for (0..qk / 2) |j| {
            t += @intCast(@abs((@as(i32, a.qs[j] & 15) - 8) * b.qs[j]));
            t += @intCast(@abs((@as(i32, a.qs[j] >> 4) - 8) * b.qs[j + 16]));
        }
        m += @as(f32, @floatFromInt(t)) * abi.f16ToF32(a.d) * abi.f16ToF32(b.d);
    }
    return m;
}
