# The file work of one of the exporter's sweeps or checks, as the floors
# (benches/floor.c, benches/scrape-floor.c) take it: FILE to read and print,
# check:FILE to read back, write:FILE=VALUE to write.
#   awk -v dev=HWMON_DIR -v what=sweep|probe -f scrape-ops.awk MECHANISMS EXPOSITION
# MECHANISMS: "block mechanism" lines (bfperf blocks --csv's first and third
# columns); EXPOSITION: a scrape of the exporter. For each block with counters in
# it (bfperf_cycles_total, bfperf_events_total), in the exposition's order: an
# all-at-once block's enable, count_clock and its events' event<N> read back, then
# (a sweep) the block stopped, its counters read, the block started, where a check
# reads the same without the writes; a per-counter block's counters, then their
# event<N>. A sweep then reads each PLL's two clock_measure registers.
NR == FNR { mech[$1] = $2; next }
function label(line, name,    s) {
  s = substr(line, index(line, name "=\"") + length(name) + 2)
  return substr(s, 1, index(s, "\"") - 1)
}
/^bfperf_(cycles|events)_total\{/ {
  b = label($0, "block")
  if (!(b in ctr)) order[n++] = b
  ctr[b] = ctr[b] dev "/" b "/counter" label($0, "counter") " "
  if ($0 ~ /^bfperf_events/) ev[b] = ev[b] "check:" dev "/" b "/event" label($0, "counter") " "
}
/^bfperf_pll_frequency_hertz\{/ {
  p = label($0, "pll")
  pll = pll dev "/clock_measure/FMON_CLK_LAST_COUNT_" p " " dev "/clock_measure/REFERENCE_WINDOW_WIDTH_" p " "
}
END {
  for (i = 0; i < n; i++) {
    b = order[i]
    if (mech[b] == "all-at-once") {
      printf "check:%s/%s/enable ", dev, b
      if (system("test -f " dev "/" b "/count_clock") == 0) printf "check:%s/%s/count_clock ", dev, b
      printf "%s", ev[b]
      if (what == "sweep") printf "write:%s/%s/enable=0 ", dev, b
      printf "%s", ctr[b]
      if (what == "sweep") printf "write:%s/%s/enable=1 ", dev, b
    } else printf "%s%s", ctr[b], ev[b]
  }
  if (what == "sweep") printf "%s", pll
  print ""
}
