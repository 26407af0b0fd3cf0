//! The C ABI contract shared by the library root and the per-ISA kernel
//! objects: status codes, block layouts and the identifiers of variants.
//! Every number here is mirrored in `ffi/symbols.ts`; change both together.

const std = @import("std");

/// Bumped whenever an exported signature or a status code changes.
pub const abi_version: u32 = 7;

/// Status codes returned by every fallible export. Zero is success, negative
/// is an error. I/O failures are returned as `io_base - errno`.
pub const Status = enum(i32) {
    ok = 0,
    /// An argument is outside its documented domain (a zero count, a bad mode).
    invalid_arg = -1,
    /// A buffer is shorter than the sizes it was described with, or a count
    /// is not a multiple of the block size.
    length = -2,
    /// A pointer or an offset is not aligned as required.
    alignment = -3,
    /// An index or a range points past what it indexes.
    range = -4,
    /// The requested kernel variant cannot run on this CPU.
    unsupported = -5,
    /// `cf_init` has not been called successfully.
    not_initialized = -6,
    /// An input vector holds NaN or an infinity where a finite value is needed.
    nonfinite = -7,
    /// The allocator refused.
    no_memory = -9,
    /// A handle is unknown, stale or of the wrong kind.
    handle = -10,
    /// A size computation overflowed.
    overflow = -11,
    /// A fixed limit (threads, handles) would be exceeded.
    limit = -12,
    /// The object is in use (a region a plan still reads, a plan already running).
    busy = -13,
    /// A mapped file was truncated or rewritten since it was mapped.
    changed = -14,
    /// A plan run stopped early because its cancel flag was set.
    cancelled = -15,
    _,

    pub fn code(s: Status) i32 {
        return @intFromEnum(s);
    }
};

/// `io_base - errno` is returned for a failed system call.
pub const io_base: i32 = -1000;

pub fn ioStatus(errno: i32) i32 {
    std.debug.assert(errno > 0 and errno < 4096);
    return io_base - errno;
}

/// Kernel variants. Ids are stable; `avxvnni` (AVX2 plus the 256-bit,
/// VEX-encoded `vpdpbusd` of Alder Lake and later, Zen 5 client parts) came
/// last, so id order is not ISA order: `cpu.best` holds the preference.
pub const Variant = enum(u32) {
    scalar = 1,
    avx2 = 2,
    avx512vnni = 3,
    avxvnni = 4,
    /// aarch64 Advanced SIMD (ARMv8-A baseline).
    neon = 5,
    /// aarch64 with SDOT (ARMv8.2-A dotprod: Neoverse N1/V1, Graviton 2+,
    /// Ampere Altra, Apple M1+).
    neon_dotprod = 6,
};

/// The variants a library built for `arch` links, in id order.
pub fn variantsOf(comptime arch: std.Target.Cpu.Arch) []const Variant {
    return switch (arch) {
        .x86_64 => &.{ .scalar, .avx2, .avx512vnni, .avxvnni },
        .aarch64 => &.{ .scalar, .neon, .neon_dotprod },
        else => &.{.scalar},
    };
}

/// Number of weights in one ggml quantization block.
pub const qk: usize = 32;

/// ggml `block_q8_0`: an f16 scale and 32 signed bytes.
pub const BlockQ8_0 = extern struct {
    d: u16 align(1),
    qs: [qk]i8 align(1),
};

/// ggml `block_q4_0`: an f16 scale and 32 nibbles; element j < 16 is the low
/// nibble of qs[j], element j + 16 the high nibble; value = (nibble - 8) * d.
pub const BlockQ4_0 = extern struct {
    d: u16 align(1),
    qs: [qk / 2]u8 align(1),
};

pub const q8_0_block_bytes: usize = 34;
pub const q4_0_block_bytes: usize = 18;

comptime {
    std.debug.assert(@sizeOf(BlockQ8_0) == q8_0_block_bytes);
    std.debug.assert(@sizeOf(BlockQ4_0) == q4_0_block_bytes);
    std.debug.assert(@alignOf(BlockQ8_0) == 1);
    std.debug.assert(@alignOf(BlockQ4_0) == 1);
}

/// RoPE pair conventions.
pub const RopeMode = enum(u32) {
    /// Adjacent pairs (2i, 2i+1): GPT-J, llama.cpp's LLAMA_ROPE_TYPE_NORM.
    normal = 0,
    /// Split halves (i, i + n_rot/2): GPT-NeoX, Hugging Face Llama/Qwen/Gemma.
    neox = 1,
};

/// Largest position RoPE accepts: positions are converted to f32 exactly.
pub const rope_max_pos: u32 = 1 << 24;

/// Converts IEEE binary16 bits to f32 exactly.
pub inline fn f16ToF32(bits: u16) f32 {
    if (comptime @import("builtin").cpu.arch == .wasm32) return f16BitsToF32(bits);
    return @floatCast(@as(f16, @bitCast(bits)));
}

/// The same conversion by bit manipulation, for wasm32, which has no f16
/// instruction (`@floatCast` would call compiler_rt's `__extendhfsf2` per
/// value). Exact, so equal to any other exact conversion; NaNs come out
/// quiet with the payload shifted up, as compiler_rt makes them.
fn f16BitsToF32(h: u16) f32 {
    const sign: u32 = @as(u32, h & 0x8000) << 16;
    const exp: u32 = (h >> 10) & 0x1f;
    const mant: u32 = h & 0x3ff;
    if (exp == 0x1f) {
        if (mant == 0) return @bitCast(sign | 0x7f800000);
        return @bitCast(sign | 0x7fc00000 | ((mant & 0x1ff) << 13));
    }
    if (exp == 0) {
        const v: f32 = @as(f32, @floatFromInt(mant)) * 0x1p-24;
        return if (sign != 0) -v else v;
    }
    return @bitCast(sign | ((exp + 112) << 23) | (mant << 13));
}

test "f16 bits to f32 by hand equals the conversion, for every bit pattern" {
    for (0..1 << 16) |i| {
        const h: u16 = @intCast(i);
        const want: f32 = @floatCast(@as(f16, @bitCast(h)));
        const got = f16BitsToF32(h);
        if (std.math.isNan(want)) {
            try std.testing.expect(std.math.isNan(got));
        } else {
            try std.testing.expectEqual(@as(u32, @bitCast(want)), @as(u32, @bitCast(got)));
        }
    }
}

/// Converts f32 to IEEE binary16 bits, round to nearest even.
pub inline fn f32ToF16(x: f32) u16 {
    return @bitCast(@as(f16, @floatCast(x)));
}

test "f16 round trip of representable values" {
    const values = [_]f32{ 0.0, -0.0, 1.0, -2.5, 65504.0, 6.1035156e-05, 5.9604645e-08 };
    for (values) |v| {
        try std.testing.expectEqual(v, f16ToF32(f32ToF16(v)));
    }
    try std.testing.expectEqual(@as(u16, 0x3c00), f32ToF16(1.0));
    try std.testing.expectEqual(@as(u16, 0x7c00), f32ToF16(1.0e6));
}
