/*
 * A model of a BlueField PMC for QEMU: the registers the mlxbf-pmc driver talks to,
 * answering at the moment of each access, and the SiP service it calls by SMC.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * This file is part of bfperf's test rig, under the GNU General Public License,
 * version 2 or (at your option) any later version, as QEMU requires of the devices
 * built into it. See tests/real-driver/qemu/README.md.
 *
 *   -device bfpmc,blocks=FILE[,skew-ppm=N]
 *
 * FILE lists the blocks, one per line: NAME BASE SIZE COUNTERS TYPE (the driver's
 * types: 0 registers, 1 counters, 2 crspace), as the ACPI table gives them to the
 * driver. Every block is mapped at its BASE. What the driver does there:
 *
 * - counter blocks (tile, tilenet, trio, triogen, pcie... of type 1, BlueField-1/-2
 *   mss, gic, smmu): a 64-bit PERFMON_CONFIG word per counter at 8*c, a data word at
 *   8*(COUNTERS + c). A config write with its strobe and write bits sets the
 *   counter's PERFCTL (0), PERFEVT (1) or accumulator (4) to WDATA; without the
 *   write bit it selects which of them the data word reads.
 * - L3 blocks (a counter block whose name holds "l3cache"): PERF_CNT_CFG at 0x0 (EN
 *   bit 0, RST bit 1), the event selects at 0x10 (counters 0-3, 6 bits each at 0, 8,
 *   16, 24) and 0x14 (counter 4), 57-bit counters as low words at 0x40 + 4c and high
 *   words (25 bits) at 0x60 + 4c. Counting only while EN; RST zeroes all.
 * - crspace blocks (BlueField-3 llt, llt_miss, mss and later kinds): 32-bit words;
 *   event selects at 4*(c/2) (even counters bits 23:16, odd ones 7:0); PERFMON_CTL at
 *   2*COUNTERS (EN bit 30; CLR bit 28 zeroes every counter); 32-bit counters at
 *   PERFMON_CTL + 0xc + 4c, which wrap; writing one sets it.
 * - register blocks (pcie, ecc, clock_measure): free-running registers, 64-bit at
 *   each 8-byte offset (ecc's 32-bit), a write sets the value.
 *
 * - count_clock (crspace blocks, kernels 6.14 on): a 32-bit word at PERFMON_CTL + 4;
 *   counter c counts clock cycles instead of its event while bit c is set.
 *
 * Rates, the truth the tests count against, and distinct enough that reading the
 * wrong counter, event, block or register shows. A counter's rate depends on the
 * block's place r in FILE (0 for the first line), the counter's index c and its event
 * E (256 for clock cycles, which count half a step up: 1.01^(key + 1/2), never at an
 * event's rate):
 *
 *   key = (97 E + 41 c + 29 r) mod 128,   rate = round(5 * 10^8 * 1.01^key) a second
 *
 * so neighbouring events, counters and blocks differ by 29 or more steps of 1 %. An
 * event the driver's table names DISABLE counts nothing (event 0 of the tile,
 * tilenet, trio, BlueField-1/-2 mss and L3 tables; every other table's event 0 is a
 * real event and counts), nor does 0xff, the stop older kernels write. A register at
 * byte offset R (4-byte slot s = R / 4) counts
 *
 *   key = (53 s + 29 r + 17) mod 128,   rate = round(5 * 10^6 * 1.01^key) a second
 *
 * (ecc's 32-bit registers, a pair at 0x100 and 0x104, differ). clock_measure's
 * registers are levels, not counts (a clock monitor's last count and its reference
 * window): each holds round(10^5 * 1.01^key), by the same key.
 * Time is the guest's (QEMU's virtual clock), so rates are per guest second.
 * skew-ppm=N makes every rate N parts per million off: the stage boots such a model
 * once to show its checks fail.
 *
 * mutants=NAME:KIND[+NAME:KIND...] makes the blocks of KIND behave as a bug of
 * bfperf's would show on the hardware, for the stage to see its checks fail:
 *   event-off-by-one       an event E counts as E - 1
 *   counters-swapped       counters 0 and 1 count as each other
 *   blocks-swapped         the kind's first two blocks count as each other
 *   l3-enable-ignored      L3 counters count whether enabled or not
 *   crspace-wrap-removed   32-bit crspace counters stop at 0xffffffff
 *   register-pair-swapped  the registers of each 8-byte pair count as each other
 *                          (ecc's 0x100 and 0x104; clock_measure's count and window)
 *   restore-wrong-event    an event select that goes back to the event a counter
 *                          had before its current one is lost (a put-back that
 *                          leaves the measured event)
 *
 * The SiP service (the driver's probe and its secure accesses, taken when the ACPI
 * table has sec_reg_block): SIP_SVC_UID answers NVIDIA's service UUID, SIP_SVC_VERSION
 * 0.3, READ_REG_32/64 and WRITE_REG_32/64 reach the same registers by physical
 * address (outside every block: access violation, -4). Other SiP calls are not
 * supported (-1).
 */

#include "qemu/osdep.h"
#include <math.h>
#include "qapi/error.h"
#include "qemu/timer.h"
#include "qemu/module.h"
#include "qemu/error-report.h"
#include "qemu/cutils.h"
#include "exec/address-spaces.h"
#include "exec/memory.h"
#include "hw/qdev-core.h"
#include "hw/qdev-properties.h"
#include "hw/misc/bfpmc.h"

#define TYPE_BFPMC "bfpmc"
OBJECT_DECLARE_SIMPLE_TYPE(BfPmcState, BFPMC)

#define MAX_BLOCKS 128
#define MAX_COUNTERS 64
#define MAX_REGS 256
#define EVENT_BASE 500000000.0
#define REG_BASE 5000000.0
#define LEVEL_BASE 100000.0
#define KEYS 128
#define CLOCK_EVENT 256
#define NO_EVENT 0xffffffffu

enum {
    M_EVENT_OFF_BY_ONE = 1 << 0,
    M_COUNTERS_SWAPPED = 1 << 1,
    M_BLOCKS_SWAPPED = 1 << 2,
    M_L3_ENABLE_IGNORED = 1 << 3,
    M_CRSPACE_WRAP_REMOVED = 1 << 4,
    M_REGISTER_PAIR_SWAPPED = 1 << 5,
    M_RESTORE_WRONG_EVENT = 1 << 6,
};

static const struct {
    const char *name;
    uint32_t bit;
} mutant_names[] = {
    { "event-off-by-one", M_EVENT_OFF_BY_ONE },
    { "counters-swapped", M_COUNTERS_SWAPPED },
    { "blocks-swapped", M_BLOCKS_SWAPPED },
    { "l3-enable-ignored", M_L3_ENABLE_IGNORED },
    { "crspace-wrap-removed", M_CRSPACE_WRAP_REMOVED },
    { "register-pair-swapped", M_REGISTER_PAIR_SWAPPED },
    { "restore-wrong-event", M_RESTORE_WRONG_EVENT },
};

/* Tables whose event 0 is DISABLE (it counts nothing): the driver's hnf (tile),
 * hnfnet (tilenet), trio_events_1/_2, l3c and mss_events_1 (BlueField-1/-2 mss,
 * a counter block; BlueField-3's mss is crspace and its event 0 counts). */
static const char *const zero_is_disable[] = { "tile", "tilenet", "trio", "l3cachehalf" };

enum { T_REGISTER = 0, T_COUNTER = 1, T_CRSPACE = 2, T_L3 = 3 };

/* One counter: it counts `event` at its rate while running; its value is `base`
 * plus what it counted since `since` (ns). */
typedef struct Counter {
    uint32_t event;
    /* The event before the current one (restore-wrong-event). */
    uint32_t prev_event;
    /* Its index in the block, and the block, for its rate. */
    uint32_t index;
    struct Block *b;
    bool running;
    uint64_t base;
    int64_t since;
    /* Counter blocks: PERFCTL, and which register the data word reads. */
    uint64_t perfctl;
    uint32_t latched;
} Counter;

typedef struct Block {
    char name[32];
    /* The name without its number (tile2: tile). */
    char kind[32];
    /* Its place in FILE, which its rates depend on (blocks-swapped exchanges it
     * with the kind's other first block). */
    uint32_t rid;
    /* The mutants that apply to it. */
    uint32_t mutants;
    /* Event 0 counts nothing here. */
    bool zero_disabled;
    /* crspace: count_clock, a counter's bit makes it count clock cycles. */
    uint32_t count_clock;
    uint64_t base, size;
    uint32_t counters;
    int type;
    MemoryRegion mr;
    struct BfPmcState *s;
    Counter c[MAX_COUNTERS];
    /* L3 and crspace: the block's control word and event selects. */
    uint32_t ctl;
    uint32_t sel[MAX_COUNTERS / 2 + 2];
    /* Register blocks: each register's value at `since`. */
    uint64_t reg[MAX_REGS];
    int64_t reg_since[MAX_REGS];
} Block;

struct BfPmcState {
    DeviceState parent_obj;
    char *blocks_file;
    char *mutants;
    /* Every rate off by this many parts per million: a model the suite's checks
     * must find wrong. */
    int32_t skew_ppm;
    Block *b;
    int n;
};

static BfPmcState *the_pmc;

static int64_t now_ns(void)
{
    return qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
}

static uint64_t skewed(uint64_t rate)
{
    int64_t ppm = the_pmc ? the_pmc->skew_ppm : 0;
    return (uint64_t)(((__int128)rate * (1000000 + ppm)) / 1000000);
}

/* round(base * 1.01^key), the rate of a key; half a step up for clock cycles. */
static uint64_t key_rate_at(double base, uint32_t key, double half)
{
    return skewed((uint64_t)llround(base * pow(1.01, (key % KEYS) + half)));
}

static uint64_t key_rate(double base, uint32_t key)
{
    return key_rate_at(base, key, 0);
}

/* What a counter counts a second: see the rates above. */
static uint64_t event_rate(Counter *c)
{
    Block *b = c->b;
    uint32_t e = c->event, index = c->index;
    bool clock = b->type == T_CRSPACE && (b->count_clock >> index) & 1;

    if (clock) {
        e = CLOCK_EVENT;
    } else {
        if (e >= 0xff || (e == 0 && b->zero_disabled)) {
            return 0;
        }
        if (b->mutants & M_EVENT_OFF_BY_ONE) {
            if (e == 0 || (e == 1 && b->zero_disabled)) {
                return 0;
            }
            e -= 1;
        }
    }
    if ((b->mutants & M_COUNTERS_SWAPPED) && index < 2) {
        index ^= 1;
    }
    return key_rate_at(EVENT_BASE, 97 * e + 41 * index + 29 * b->rid, clock ? 0.5 : 0);
}

/* What `events` at `rate` a second amount to over `ns`, exactly. */
static uint64_t counted(uint64_t rate, int64_t ns)
{
    return ns <= 0 ? 0 : (uint64_t)(((__uint128_t)rate * (uint64_t)ns) / 1000000000ULL);
}

static uint64_t counter_value(Counter *c, int64_t now)
{
    return c->base + (c->running ? counted(event_rate(c), now - c->since) : 0);
}

/* Sets a counter's value (and whether it runs) from now on. */
static void counter_set(Counter *c, uint64_t v, bool running, int64_t now)
{
    c->base = v;
    c->running = running;
    c->since = now;
}

/* Changes what a counter counts from now on, keeping what it counted. */
static void counter_event(Counter *c, uint32_t event, int64_t now)
{
    if (event == c->event) {
        return;
    }
    if ((c->b->mutants & M_RESTORE_WRONG_EVENT) && event == c->prev_event) {
        return;
    }
    counter_set(c, counter_value(c, now), c->running, now);
    c->prev_event = c->event;
    c->event = event;
}

/* ---- counter blocks: PERFMON_CONFIG and data words ---- */

#define CFG_WR (1ULL << 0)
#define CFG_STROBE (1ULL << 1)
#define CFG_ADDR(v) (((v) >> 2) & 7)
#define CFG_WDATA(v) (((v) >> 5) & ((1ULL << 56) - 1))
#define PERFCTL 0
#define PERFEVT 1
#define PERFACC0 4
#define PERFCTL_EN0 (1ULL << 31)

static uint64_t counter_block_read(Block *b, uint64_t off, int64_t now)
{
    uint64_t word = off / 8;
    if (word < b->counters) {
        return 0;
    }
    if (word >= 2ULL * b->counters) {
        return 0;
    }
    Counter *c = &b->c[word - b->counters];
    switch (c->latched) {
    case PERFCTL:
        return c->perfctl;
    case PERFEVT:
        return (uint64_t)c->event << 24;
    case PERFACC0:
        return counter_value(c, now);
    default:
        return 0;
    }
}

static void counter_block_write(Block *b, uint64_t off, uint64_t v, int64_t now)
{
    uint64_t word = off / 8;
    if (word >= b->counters || !(v & CFG_STROBE)) {
        return;
    }
    Counter *c = &b->c[word];
    uint32_t addr = CFG_ADDR(v);
    if (!(v & CFG_WR)) {
        c->latched = addr;
        return;
    }
    uint64_t data = CFG_WDATA(v);
    switch (addr) {
    case PERFCTL:
        c->perfctl = data;
        counter_set(c, counter_value(c, now), (data & PERFCTL_EN0) != 0, now);
        break;
    case PERFEVT:
        counter_event(c, (data >> 24) & 0xff, now);
        break;
    case PERFACC0:
        counter_set(c, data, c->running, now);
        break;
    }
}

/* ---- L3 ---- */

#define L3_CFG 0x0
#define L3_SEL 0x10
#define L3_SEL_1 0x14
#define L3_LOW 0x40
#define L3_HIGH 0x60
#define L3_EN 1u
#define L3_RST 2u
#define L3_MASK ((1ULL << 57) - 1)

static uint32_t l3_event(Block *b, uint32_t i)
{
    return i < 4 ? (b->sel[0] >> (8 * i)) & 0x3f : b->sel[1] & 0x3f;
}

static uint64_t l3_read(Block *b, uint64_t off, int64_t now)
{
    if (off == L3_CFG) {
        return b->ctl;
    }
    if (off == L3_SEL || off == L3_SEL_1) {
        return b->sel[off == L3_SEL_1];
    }
    for (uint32_t i = 0; i < b->counters && i < 5; i++) {
        uint64_t v = counter_value(&b->c[i], now) & L3_MASK;
        if (off == L3_LOW + 4 * i) {
            return (uint32_t)v;
        }
        if (off == L3_HIGH + 4 * i) {
            return v >> 32;
        }
    }
    return 0;
}

static void l3_write(Block *b, uint64_t off, uint32_t v, int64_t now)
{
    uint32_t n = MIN(b->counters, 5);
    if (off == L3_CFG) {
        b->ctl = v & (L3_EN | L3_RST);
        for (uint32_t i = 0; i < n; i++) {
            Counter *c = &b->c[i];
            uint64_t keep = (v & L3_RST) ? 0 : counter_value(c, now);
            bool on = (v & L3_EN) || (b->mutants & M_L3_ENABLE_IGNORED);
            counter_set(c, keep, on, now);
        }
    } else if (off == L3_SEL || off == L3_SEL_1) {
        b->sel[off == L3_SEL_1] = v;
        for (uint32_t i = 0; i < n; i++) {
            counter_event(&b->c[i], l3_event(b, i), now);
        }
    }
    /* Counters are read-only. */
}

/* ---- crspace ---- */

#define CR_EN (1u << 30)
#define CR_CLR (1u << 28)

static uint32_t cr_event(Block *b, uint32_t i)
{
    uint32_t w = b->sel[i / 2];
    return (i % 2) ? (w & 0xff) : ((w >> 16) & 0xff);
}

static uint64_t cr_ctl(Block *b)
{
    return 2ULL * b->counters;
}

static uint64_t crspace_read(Block *b, uint64_t off, int64_t now)
{
    uint64_t ctl = cr_ctl(b), val0 = ctl + 0xc;
    if (off < 4ULL * ((b->counters + 1) / 2) && off % 4 == 0 && off < ctl) {
        return b->sel[off / 4];
    }
    if (off == ctl) {
        return b->ctl;
    }
    if (off == ctl + 4) {
        return b->count_clock;
    }
    if (off >= val0 && off < val0 + 4ULL * b->counters && (off - val0) % 4 == 0) {
        uint64_t v = counter_value(&b->c[(off - val0) / 4], now);
        if (b->mutants & M_CRSPACE_WRAP_REMOVED) {
            return MIN(v, 0xffffffffULL);
        }
        return (uint32_t)v;
    }
    return 0;
}

static void crspace_write(Block *b, uint64_t off, uint32_t v, int64_t now)
{
    uint64_t ctl = cr_ctl(b), val0 = ctl + 0xc;
    if (off < 4ULL * ((b->counters + 1) / 2) && off % 4 == 0 && off < ctl) {
        b->sel[off / 4] = v;
        for (uint32_t i = 0; i < b->counters; i++) {
            counter_event(&b->c[i], cr_event(b, i), now);
        }
    } else if (off == ctl) {
        b->ctl = v & ~CR_CLR;
        for (uint32_t i = 0; i < b->counters; i++) {
            Counter *c = &b->c[i];
            uint64_t keep = (v & CR_CLR) ? 0 : counter_value(c, now);
            counter_set(c, keep, (v & CR_EN) != 0, now);
        }
    } else if (off == ctl + 4) {
        /* Every counter keeps what it counted; from now on those with their bit
         * set count clock cycles. */
        for (uint32_t i = 0; i < b->counters; i++) {
            Counter *c = &b->c[i];
            counter_set(c, counter_value(c, now), c->running, now);
        }
        b->count_clock = v;
    } else if (off >= val0 && off < val0 + 4ULL * b->counters && (off - val0) % 4 == 0) {
        Counter *c = &b->c[(off - val0) / 4];
        counter_set(c, v, c->running, now);
    }
}

/* ---- register blocks ---- */

/* 32-bit registers (ecc, clock_measure) at any 4-byte offset; the others are 64
 * bits at 8-byte ones. */
static bool narrow(Block *b)
{
    return !strcmp(b->kind, "ecc") || !strcmp(b->kind, "clock_measure");
}

static uint64_t reg_value(Block *b, uint32_t slot, int64_t now)
{
    uint32_t key_slot = (b->mutants & M_REGISTER_PAIR_SWAPPED) ? slot ^ 1 : slot;
    uint32_t key = 53 * key_slot + 29 * b->rid + 17;
    if (!strcmp(b->kind, "clock_measure")) {
        /* Levels: a clock monitor's last count and its window hold still. */
        return (uint32_t)key_rate(LEVEL_BASE, key);
    }
    uint64_t rate = key_rate(REG_BASE, key);
    uint64_t v = b->reg[slot] + counted(rate, now - b->reg_since[slot]);
    return narrow(b) ? (uint32_t)v : v;
}

static uint64_t register_read(Block *b, uint64_t off, int64_t now)
{
    uint32_t slot = off / 4;
    return (off % 4 == 0 && slot < MAX_REGS) ? reg_value(b, slot, now) : 0;
}

static void register_write(Block *b, uint64_t off, uint64_t v, int64_t now)
{
    uint32_t slot = off / 4;
    if (off % 4 == 0 && slot < MAX_REGS) {
        b->reg[slot] = narrow(b) ? (uint32_t)v : v;
        b->reg_since[slot] = now;
    }
}

/* ---- dispatch ---- */

static uint64_t block_read(Block *b, uint64_t off, unsigned size)
{
    int64_t now = now_ns();
    switch (b->type) {
    case T_COUNTER:
        return counter_block_read(b, off, now);
    case T_L3:
        return l3_read(b, off, now);
    case T_CRSPACE:
        return crspace_read(b, off, now);
    default:
        return register_read(b, off, now);
    }
}

static void block_write(Block *b, uint64_t off, uint64_t v, unsigned size)
{
    int64_t now = now_ns();
    switch (b->type) {
    case T_COUNTER:
        counter_block_write(b, off, v, now);
        break;
    case T_L3:
        l3_write(b, off, v, now);
        break;
    case T_CRSPACE:
        crspace_write(b, off, v, now);
        break;
    default:
        register_write(b, off, v, now);
        break;
    }
}

static uint64_t mmio_read(void *opaque, hwaddr off, unsigned size)
{
    return block_read(opaque, off, size);
}

static void mmio_write(void *opaque, hwaddr off, uint64_t v, unsigned size)
{
    block_write(opaque, off, v, size);
}

static const MemoryRegionOps bfpmc_ops = {
    .read = mmio_read,
    .write = mmio_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = { .min_access_size = 4, .max_access_size = 8 },
    .impl = { .min_access_size = 4, .max_access_size = 8 },
};

/* ---- the SiP service ---- */

#define SIP_WRITE_REG_32 0x82000009
#define SIP_READ_REG_32 0x8200000A
#define SIP_WRITE_REG_64 0x8200000B
#define SIP_READ_REG_64 0x8200000C
#define SIP_SVC_UID 0x8200ff01
#define SIP_SVC_VERSION 0x8200ff03
#define SMC_NOT_SUPPORTED ((uint64_t)-1)
#define SMC_ACCESS_VIOLATION ((uint64_t)-4)

static Block *block_at(BfPmcState *s, uint64_t addr, uint64_t *off)
{
    for (int i = 0; i < s->n; i++) {
        Block *b = &s->b[i];
        if (addr >= b->base && addr < b->base + b->size) {
            *off = addr - b->base;
            return b;
        }
    }
    return NULL;
}

bool bfpmc_sip_call(uint64_t *x)
{
    BfPmcState *s = the_pmc;
    uint64_t off;
    Block *b;
    uint32_t fn = x[0];

    if (!s || (fn & 0xff000000) != 0x82000000) {
        return false;
    }
    switch (fn) {
    case SIP_SVC_UID:
        /* 89c036b4-e7d7-11e6-8797-001aca00bfc4, as the SMC calling convention
         * returns a UUID in four words. */
        x[0] = 0x89c036b4;
        x[1] = 0x11e6e7d7;
        x[2] = 0x1a009787;
        x[3] = 0xc4bf00ca;
        return true;
    case SIP_SVC_VERSION:
        x[0] = 0;
        x[1] = 3;
        return true;
    case SIP_READ_REG_32:
    case SIP_READ_REG_64:
        b = block_at(s, x[2], &off);
        if (!b) {
            x[0] = SMC_ACCESS_VIOLATION;
            return true;
        }
        x[1] = block_read(b, off, fn == SIP_READ_REG_32 ? 4 : 8);
        if (fn == SIP_READ_REG_32) {
            x[1] = (uint32_t)x[1];
        }
        x[0] = 0;
        return true;
    case SIP_WRITE_REG_32:
    case SIP_WRITE_REG_64:
        b = block_at(s, x[3], &off);
        if (!b) {
            x[0] = SMC_ACCESS_VIOLATION;
            return true;
        }
        block_write(b, off, fn == SIP_WRITE_REG_32 ? (uint32_t)x[2] : x[2],
                    fn == SIP_WRITE_REG_32 ? 4 : 8);
        x[0] = 0;
        return true;
    default:
        x[0] = SMC_NOT_SUPPORTED;
        return true;
    }
}

/* ---- set-up ---- */

static void load_blocks(BfPmcState *s, Error **errp)
{
    FILE *f = fopen(s->blocks_file, "r");
    char line[256];

    if (!f) {
        error_setg_errno(errp, errno, "bfpmc: cannot open %s", s->blocks_file);
        return;
    }
    s->b = g_new0(Block, MAX_BLOCKS);
    while (fgets(line, sizeof(line), f)) {
        Block *b = &s->b[s->n];
        char name[32];
        uint64_t base, size;
        unsigned counters, type;
        if (sscanf(line, "%31s %" SCNx64 " %" SCNx64 " %u %u", name, &base, &size,
                   &counters, &type) != 5) {
            continue;
        }
        if (s->n == MAX_BLOCKS || counters > MAX_COUNTERS) {
            error_setg(errp, "bfpmc: %s: too many blocks or counters", s->blocks_file);
            break;
        }
        pstrcpy(b->name, sizeof(b->name), name);
        b->base = base;
        b->size = size;
        b->counters = counters;
        b->type = (type == T_COUNTER && strstr(name, "l3cache")) ? T_L3 : (int)type;
        b->s = s;
        pstrcpy(b->kind, sizeof(b->kind), name);
        for (size_t k = strlen(b->kind); k > 0 && g_ascii_isdigit(b->kind[k - 1]); k--) {
            b->kind[k - 1] = 0;
        }
        b->rid = s->n;
        for (size_t k = 0; k < ARRAY_SIZE(zero_is_disable); k++) {
            b->zero_disabled |= !strcmp(b->kind, zero_is_disable[k]);
        }
        b->zero_disabled |= !strcmp(b->kind, "mss") && type == T_COUNTER;
        for (uint32_t i = 0; i < MAX_COUNTERS; i++) {
            b->c[i].index = i;
            b->c[i].b = b;
            b->c[i].prev_event = NO_EVENT;
        }
        s->n++;
    }
    fclose(f);
}

/* mutants=NAME:KIND[+NAME:KIND...]: each applies to every block of KIND. */
static void load_mutants(BfPmcState *s, Error **errp)
{
    g_auto(GStrv) items = g_strsplit(s->mutants ? s->mutants : "", "+", -1);

    for (int i = 0; items[i]; i++) {
        char *colon = strchr(items[i], ':');
        uint32_t bit = 0;
        if (!*items[i]) {
            continue;
        }
        if (!colon) {
            error_setg(errp, "bfpmc: mutant '%s' is not NAME:KIND", items[i]);
            return;
        }
        *colon = 0;
        for (size_t k = 0; k < ARRAY_SIZE(mutant_names); k++) {
            if (!strcmp(items[i], mutant_names[k].name)) {
                bit = mutant_names[k].bit;
            }
        }
        if (!bit) {
            error_setg(errp, "bfpmc: no mutant named '%s'", items[i]);
            return;
        }
        Block *first = NULL, *second = NULL;
        for (int j = 0; j < s->n; j++) {
            Block *b = &s->b[j];
            if (strcmp(b->kind, colon + 1)) {
                continue;
            }
            b->mutants |= bit;
            if (!first) {
                first = b;
            } else if (!second) {
                second = b;
            }
        }
        if (!first) {
            error_setg(errp, "bfpmc: mutant %s: no block of kind '%s'", items[i], colon + 1);
            return;
        }
        if (bit == M_BLOCKS_SWAPPED) {
            if (!second) {
                error_setg(errp, "bfpmc: blocks-swapped needs two blocks of '%s'", colon + 1);
                return;
            }
            uint32_t r = first->rid;
            first->rid = second->rid;
            second->rid = r;
        }
    }
}

static void bfpmc_realize(DeviceState *dev, Error **errp)
{
    BfPmcState *s = BFPMC(dev);

    if (the_pmc) {
        error_setg(errp, "bfpmc: one PMC per machine");
        return;
    }
    if (!s->blocks_file) {
        error_setg(errp, "bfpmc: blocks=FILE is required");
        return;
    }
    load_blocks(s, errp);
    if (*errp) {
        return;
    }
    load_mutants(s, errp);
    if (*errp) {
        return;
    }
    for (int i = 0; i < s->n; i++) {
        Block *b = &s->b[i];
        memory_region_init_io(&b->mr, OBJECT(s), &bfpmc_ops, b, b->name, b->size);
        memory_region_add_subregion(get_system_memory(), b->base, &b->mr);
    }
    the_pmc = s;
}

static const Property bfpmc_properties[] = {
    DEFINE_PROP_STRING("blocks", BfPmcState, blocks_file),
    DEFINE_PROP_STRING("mutants", BfPmcState, mutants),
    DEFINE_PROP_INT32("skew-ppm", BfPmcState, skew_ppm, 0),
};

static void bfpmc_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);

    dc->realize = bfpmc_realize;
    dc->user_creatable = true;
    device_class_set_props(dc, bfpmc_properties);
}

static const TypeInfo bfpmc_info = {
    .name = TYPE_BFPMC,
    .parent = TYPE_DEVICE,
    .instance_size = sizeof(BfPmcState),
    .class_init = bfpmc_class_init,
};

static void bfpmc_register_types(void)
{
    type_register_static(&bfpmc_info);
}

type_init(bfpmc_register_types)
