//! What both memory modules (memory.zig natively, memory_wasm.zig in the
//! wasm32 build) share: region kinds, advice values, limits, and the fixed
//! table of generation-checked handles they keep their regions in. A handle is `generation << index_bits | index`, always > 0; a
//! released slot's next use gets the next generation, so a stale handle
//! never names the new region.

const std = @import("std");

const assert = std.debug.assert;

/// Slots in the table, and the bits of a handle that index it.
pub const max_regions: usize = 4096;
pub const index_bits: u5 = 12;
/// Largest alignment accepted for allocations (2 MiB, a huge page).
pub const max_alignment: usize = 2 << 20;
pub const max_path_bytes: usize = 4095;

pub const Kind = enum(u8) { free, map, alloc };

/// madvise advice values accepted (Linux numbering).
pub const Advice = enum(u32) {
    normal = 0,
    random = 1,
    sequential = 2,
    willneed = 3,
    dontneed = 4,
    /// Back with transparent huge pages where the kernel allows (allocations).
    hugepage = 14,
};

/// Where a region is: address and length.
pub const View = struct { ptr: usize, len: usize };

/// Handle arithmetic over `table`, whose entries have a `kind` (with a
/// `free` value) and a `generation`. Callers hold their own lock.
pub fn Table(comptime Region: type, comptime table: *[max_regions]Region) type {
    comptime {
        assert(max_regions == 1 << index_bits);
        assert(index_bits < 31);
    }
    const RegionKind = @FieldType(Region, "kind");
    return struct {
        pub const max_generation: u32 = (1 << (31 - index_bits)) - 1;

        pub fn handleOf(index: usize, generation: u32) i32 {
            assert(index < max_regions and generation > 0 and generation <= max_generation);
            return @intCast((generation << index_bits) | @as(u32, @intCast(index)));
        }

        /// The live region of `kind` that `handle` names, or null.
        pub fn lookup(handle: i32, kind: RegionKind) ?*Region {
            if (handle <= 0) return null;
            const h: u32 = @intCast(handle);
            const index = h & (max_regions - 1);
            const generation = h >> index_bits;
            const r = &table[index];
            if (r.kind != kind or r.generation != generation) return null;
            return r;
        }

        /// A free slot, or null when every slot is in use.
        pub fn claim() ?usize {
            for (table, 0..) |*r, i| {
                if (r.kind == .free) return i;
            }
            return null;
        }

        pub fn nextGeneration(r: *const Region) u32 {
            return if (r.generation >= max_generation) 1 else r.generation + 1;
        }
    };
}

test "handles: round trip, stale generations and wrap-around" {
    const R = struct { kind: enum(u8) { free, used } = .free, generation: u32 = 0 };
    const S = struct {
        var regions: [max_regions]R = [_]R{.{}} ** max_regions;
    };
    const T = Table(R, &S.regions);
    const i = T.claim().?;
    S.regions[i] = .{ .kind = .used, .generation = T.nextGeneration(&S.regions[i]) };
    const h = T.handleOf(i, S.regions[i].generation);
    try std.testing.expect(h > 0);
    try std.testing.expect(T.lookup(h, .used) == &S.regions[i]);
    try std.testing.expect(T.lookup(h, .free) == null);
    try std.testing.expect(T.lookup(0, .used) == null);
    try std.testing.expect(T.lookup(-3, .used) == null);
    S.regions[i] = .{ .kind = .used, .generation = T.nextGeneration(&S.regions[i]) };
    try std.testing.expect(T.lookup(h, .used) == null); // stale
    var top = R{ .kind = .used, .generation = T.max_generation };
    try std.testing.expectEqual(@as(u32, 1), T.nextGeneration(&top));
}
