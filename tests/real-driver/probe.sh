#!/bin/sh
# The driver-against-model conformance sequence: run against a device directory
# (the real driver's /sys/class/hwmon/hwmonN in the guest, a `bfperf sim mount` on the
# host) it prints what sysfs shows a user, one fact per line, so that the two outputs
# can be compared with diff.
#
#   probe.sh DEVICE_DIR
#
# What it prints: every block's files and their modes; every file's content (counter
# and register values by their form only: `0x#` or `#`, since the model counts and the
# real registers do not); then, on the first block of each kind, the result of a fixed
# list of writes to each writable file (`ok` or the error's text) and the file read
# back. Reads and writes go through dd, whose messages (strerror) are the same with
# GNU coreutils and busybox.
dev=$1
cd "$dev" || exit 1
[ "$(cat name 2>/dev/null)" = bfperf ] || { echo "probe.sh: $dev is not a bfperf device (its name is not bfperf)" >&2; exit 1; }
err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT

# read FILE: the content, or `error: TEXT`.
read_file() {
  out=$(dd if="$1" bs=65536 count=1 2>"$err") && { printf '%s\n' "$out"; return; }
  echo "error: $(sed -n 's/.*: //p' "$err" | head -1)"
}

# write FILE VALUE: `ok`, or `error: TEXT`.
write_file() {
  if printf '%s' "$2" | dd of="$1" bs=4096 conv=notrunc 2>"$err" >/dev/null; then
    echo ok
  else
    echo "error: $(grep -i 'error writing' "$err" | sed 's/.*: //' | head -1)"
  fi
}

# Values whose digits are the device's traffic, not the driver's format.
form() {
  sed -e 's/^0x[0-9a-fA-F]*$/0x#/' -e 's/^[0-9][0-9]*$/#/'
}

blocks=$(for b in *; do
  case $b in device|power|subsystem) ;; *) [ -d "$b" ] && echo "$b" ;; esac
done)

echo "== name: $(read_file name)"
for b in $blocks; do
  echo "== block $b"
  for f in $(ls "$b" | sort); do
    echo "mode $b/$f $(stat -c %a "$b/$f")"
  done
  for f in $(ls "$b" | sort); do
    case $f in
      event_list) echo "read $b/$f"; read_file "$b/$f" ;;
      event[0-9]*|enable|count_clock) echo "read $b/$f: $(read_file "$b/$f")" ;;
      *) echo "read $b/$f: $(read_file "$b/$f" | form)" ;;
    esac
  done
done

# Writes, on the first block of each kind.
seen=""
for b in $blocks; do
  kind=$(echo "$b" | sed 's/[0-9]*$//')
  case " $seen " in *" $kind "*) continue ;; esac
  seen="$seen $kind"
  # The second event of its list, by name and by number.
  second=$(read_file "$b/event_list" | sed -n 2p)
  num=$(echo "$second" | sed 's/:.*//')
  name=$(echo "$second" | sed 's/^[^:]*: *//; s/ *$//')
  for f in $(ls "$b" | sort); do
    [ -w "$b/$f" ] || continue
    case $f in
      event[0-9]*) values="$name $num 0x1 1 0 NO_SUCH_EVENT 0x999 -1 0x" ;;
      enable|count_clock) values="1 0 0x1 yes no on off 2 -1 abc" ;;
      *) values="0 1 0x0 abc -1" ;;
    esac
    for v in $values; do
      # A name followed by a newline, as `echo NAME > event0` writes it.
      [ "$v" = "$name" ] && echo "write $b/$f '$v' and a newline: $(write_file "$b/$f" "$v
")"
      echo "write $b/$f '$v': $(write_file "$b/$f" "$v")"
      case $f in
        counter*|[A-Z]*) echo "  then $b/$f: $(read_file "$b/$f" | form)" ;;
        *) echo "  then $b/$f: $(read_file "$b/$f")" ;;
      esac
    done
  done
done
echo "== end"
