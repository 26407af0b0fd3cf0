//! CPU feature bits reported by `cf_cpu_features`, for every architecture the
//! library is built for (x86-64 from cpuid, aarch64 from the auxiliary
//! vector); mirrored in ffi/symbols.ts `CPU_FEATURES`.

/// One bit per feature; a library reports only its own architecture's.
pub const Feature = enum(u6) {
    sse3 = 0,
    ssse3 = 1,
    sse4_1 = 2,
    sse4_2 = 3,
    popcnt = 4,
    cx16 = 5,
    avx = 6, // CPU support and OS-enabled YMM state
    avx2 = 7,
    fma = 8,
    f16c = 9,
    bmi1 = 10,
    bmi2 = 11,
    lzcnt = 12,
    movbe = 13,
    avx512f = 14, // CPU support and OS-enabled ZMM/opmask state
    avx512bw = 15,
    avx512cd = 16,
    avx512dq = 17,
    avx512vl = 18,
    avx512vnni = 19,
    avxvnni = 20,
    lahf_lm = 21,
    xsave = 22,
    // aarch64 (getauxval(AT_HWCAP), AT_HWCAP2)
    asimd = 23, // Advanced SIMD (NEON)
    fphp = 24, // half-precision scalar arithmetic
    asimdhp = 25, // half-precision vector arithmetic
    asimddp = 26, // SDOT/UDOT (dotprod)
    i8mm = 27, // SMMLA/USMMLA (int8 matrix multiply)
};

pub fn bit(f: Feature) u64 {
    return @as(u64, 1) << @intFromEnum(f);
}
