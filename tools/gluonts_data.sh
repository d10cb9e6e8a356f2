#!/usr/bin/env bash
# tools/gluonts_data.sh — the real series mx.gluonts's backtests and specs use, written as
# one text file per data set under $MX_GLUONTS_DATA (default ~/.mxnet/gluon-ts/datasets):
# one series per line, `item_id<TAB>start<TAB>freq<TAB>v1,v2,...` (NA for a missing value).
#   R's datasets (r-base-core, Rscript): AirPassengers, sunspot.month, co2, UKgas, nottem and
#     r_monthly (every univariate monthly series of R's datasets package with >= 72 values,
#     plus the monthly columns of Seatbelts);
#   statsmodels' elec_equip (python3-statsmodels);
#   taylor (half-hourly electricity demand, 4032 values from 2000-06-05 00:00) from the
#     pmdarima wheel on PyPI (pinned, sha256-checked, kept in ~/.cache/luamx/pip).
# Run by tools/setup.sh; safe to rerun (files are rewritten through a temp file + rename).
set -euo pipefail
DEST=${MX_GLUONTS_DATA:-$HOME/.mxnet/gluon-ts/datasets}
CACHE=${MX_PIP_CACHE:-$HOME/.cache/luamx/pip}
mkdir -p "$DEST" "$CACHE"

put() { # put NAME: stdin -> $DEST/NAME.txt atomically
  local tmp="$DEST/.$1.txt.tmp"
  cat >"$tmp" && sync "$tmp" 2>/dev/null || true
  mv -f "$tmp" "$DEST/$1.txt"
}

if command -v Rscript >/dev/null; then
  Rscript --vanilla - "$DEST" <<'RS'
args <- commandArgs(trailingOnly = TRUE)
dest <- args[1]
fmt_start <- function(x) {
  s <- start(x); f <- frequency(x)
  if (f == 12) sprintf("%04d-%02d", s[1], s[2]) else if (f == 4) sprintf("%04dQ%d", s[1], s[2]) else sprintf("%04d", s[1])
}
freq_name <- function(x) { f <- frequency(x); if (f == 12) "M" else if (f == 4) "Q" else "Y" }
line <- function(id, x) {
  v <- ifelse(is.na(x), "NA", format(as.numeric(x), digits = 15, trim = TRUE))
  paste(id, fmt_start(x), freq_name(x), paste(v, collapse = ","), sep = "\t")
}
write_set <- function(name, lines) {
  tmp <- file.path(dest, paste0(".", name, ".txt.tmp"))
  writeLines(lines, tmp)
  invisible(file.rename(tmp, file.path(dest, paste0(name, ".txt"))))
}
write_set("airpassengers", line("AirPassengers", AirPassengers))
write_set("sunspots_monthly", line("sunspot.month", sunspot.month))
write_set("co2", line("co2", co2))
write_set("ukgas", line("UKgas", UKgas))
write_set("nottem", line("nottem", nottem))
lines <- c()
for (n in sort(ls("package:datasets"))) {
  x <- get(n, "package:datasets")
  if (is.ts(x) && frequency(x) == 12 && NCOL(x) == 1 && length(x) >= 72 && n != "sunspot.month")
    lines <- c(lines, line(n, x))
}
sb <- get("Seatbelts", "package:datasets")
for (k in colnames(sb)) if (k != "law") lines <- c(lines, line(paste0("Seatbelts.", k), sb[, k]))
write_set("r_monthly", lines)
RS
else
  echo "gluonts_data: Rscript not found (Debian package r-base-core): R's series skipped" >&2
fi

SM=/usr/lib/python3/dist-packages/statsmodels/datasets/elec_equip/elec_equip.csv
if [ -f "$SM" ]; then
  awk -F, 'NR > 1 { v = v (n++ ? "," : "") $2 } END { printf "elec_equip\t1995-01\tM\t%s\n", v }' "$SM" | put elec_equip
else
  echo "gluonts_data: $SM not found (python3-statsmodels): elec_equip skipped" >&2
fi

PMD=pmdarima-2.0.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.manylinux_2_28_x86_64.whl
PMD_SHA=46677b68efffde66aa1291799b39b91420961967fa2b6e041e26bb263782d38d
if [ ! -f "$CACHE/$PMD" ]; then
  python3 -m pip download --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux2014_x86_64 pmdarima==2.0.4 -d "$CACHE" -q 2>/dev/null || true
fi
if [ -f "$CACHE/$PMD" ] && echo "$PMD_SHA  $CACHE/$PMD" | sha256sum -c --quiet 2>/dev/null; then
  unzip -p "$CACHE/$PMD" pmdarima/datasets/taylor.py |
    awk '/rslt = np.array\(\[/ { on = 1; next } on && /\]\)/ { sub(/\]\).*/, ""); s = s $0; on = 0 } on { s = s $0 }
         END { gsub(/[ \t\n]/, "", s); sub(/,$/, "", s); printf "taylor\t2000-06-05 00:00\t30min\t%s\n", s }' |
    put taylor
else
  echo "gluonts_data: the pmdarima wheel is missing or its sha256 differs: taylor skipped" >&2
fi
ls "$DEST" >&2
