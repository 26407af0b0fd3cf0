// Python's `datetime.strftime` in the C locale, for the `strftime_now` template global. Internal.

const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const MONTHS = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December",
];

function pad(n: number, width: number, fill: string): string {
  return String(n).padStart(width, fill);
}

function dayOfYear(d: Date): number {
  const start = new Date(d.getFullYear(), 0, 1);
  const utc = Date.UTC(d.getFullYear(), d.getMonth(), d.getDate());
  const utcStart = Date.UTC(start.getFullYear(), 0, 1);
  return Math.round((utc - utcStart) / 86_400_000) + 1;
}

/**
 * Formats the local time of `date` like Python's `strftime` with glibc in the C locale, for the
 * directives `%a %A %b %B %c %C %d %D %e %F %h %H %I %j %k %l %m %M %n %p %R %S %t %T %u %U %w
 * %W %x %X %y %Y %z %Z %%` (`%z`/`%Z` are empty, as for Python's naive `datetime.now()`), with
 * glibc's `-` flag (no padding, as in `%-d`). Other directives are copied unchanged.
 */
export function strftime(date: Date, format: string): string {
  return format.replace(/%(-?)([a-zA-Z%])/g, (whole, flag: string, c: string): string => {
    const p = (n: number, width: number, fill = "0"): string =>
      flag === "-" ? String(n) : pad(n, width, fill);
    const h = date.getHours();
    const wday = date.getDay();
    const yday = dayOfYear(date);
    switch (c) {
      case "a":
        return DAYS[wday].slice(0, 3);
      case "A":
        return DAYS[wday];
      case "b":
      case "h":
        return MONTHS[date.getMonth()].slice(0, 3);
      case "B":
        return MONTHS[date.getMonth()];
      case "c":
        return strftime(date, "%a %b %e %H:%M:%S %Y");
      case "C":
        return p(Math.floor(date.getFullYear() / 100), 2);
      case "d":
        return p(date.getDate(), 2);
      case "D":
      case "x":
        return strftime(date, "%m/%d/%y");
      case "e":
        return p(date.getDate(), 2, " ");
      case "F":
        return strftime(date, "%Y-%m-%d");
      case "H":
        return p(h, 2);
      case "I":
        return p(h % 12 === 0 ? 12 : h % 12, 2);
      case "j":
        return p(yday, 3);
      case "k":
        return p(h, 2, " ");
      case "l":
        return p(h % 12 === 0 ? 12 : h % 12, 2, " ");
      case "m":
        return p(date.getMonth() + 1, 2);
      case "M":
        return p(date.getMinutes(), 2);
      case "n":
        return "\n";
      case "p":
        return h < 12 ? "AM" : "PM";
      case "R":
        return strftime(date, "%H:%M");
      case "S":
        return p(date.getSeconds(), 2);
      case "t":
        return "\t";
      case "T":
      case "X":
        return strftime(date, "%H:%M:%S");
      case "u":
        return String(wday === 0 ? 7 : wday);
      case "U":
        return p(Math.floor((yday - 1 + 7 - wday) / 7), 2);
      case "w":
        return String(wday);
      case "W":
        return p(Math.floor((yday - 1 + 7 - ((wday + 6) % 7)) / 7), 2);
      case "y":
        return p(date.getFullYear() % 100, 2);
      case "Y":
        return String(date.getFullYear());
      case "z":
      case "Z":
        return "";
      case "%":
        return "%";
      default:
        return whole;
    }
  });
}
