"""Hand-built legacy (gperftools) CPU profiles, for the converter's tests and
the fuzz corpus: header, records "count depth pcs...", trailer 0 1 0, maps
text; every part can be spoiled on purpose."""
import struct

MAPS = ("00400000-00452000 r-xp 00000000 08:02 173521      /bin/true\n"
        "00651000-00652000 rw-p 00051000 08:02 173521      /bin/true\n"
        "7f0000000000-7f0000100000 r-xp 00000000 00:00 0           [vdso]\n")


def words(ws, endian, *vals):
    fmt = endian + ("Q" if ws == 8 else "I")
    return b"".join(struct.pack(fmt, v) for v in vals)


def build(records=((5, [0x401000, 0x402000]), (1, [0x401010])),
          period_us=10000, maps=MAPS, ws=8, endian="<", header=None,
          trailer=(0, 1, 0), tail=b""):
    """records: (count, [pc, ...]) leaf first."""
    hdr = header if header is not None else (0, 3, 0, period_us, 0)
    out = words(ws, endian, *hdr)
    for count, pcs in records:
        out += words(ws, endian, count, len(pcs), *pcs)
    if trailer:
        out += words(ws, endian, *trailer)
    out += tail
    if isinstance(maps, str):
        maps = maps.encode()
    return out + maps
