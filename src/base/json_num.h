/* json_num.h - exact JSON numbers (internal): reading a number token's text, and printing
 * integers and shortest round-trip floats.
 *
 * docs/format.md §2, "Literals are exact": an integer token (no '.', no exponent) is an int64 read
 * digit by digit, never through a double; a float token is the nearest double (strtod, correctly
 * rounded); printing gives back the same digits for integers and the shortest text that reads
 * back to the same bits for floats. Printing assumes the C locale. */
#ifndef VIEWLOWER_JSON_NUM_H
#define VIEWLOWER_JSON_NUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest text vl__num_format_* writes, NUL included. */
#define VL__NUM_TEXT_MAX 48

/* Length of the JSON number token (RFC 8259 grammar) at s[0..len), 0 when s does not start
 * with one. *is_float tells a '.' or an exponent. The token may be followed by anything. */
size_t vl__num_scan(const char *s, size_t len, bool *is_float);

typedef enum {
  VL__NUM_OK,
  VL__NUM_RANGE, /* an integer outside int64, or a float beyond the double range (1e400) */
  VL__NUM_BAD,   /* not exactly one JSON number */
} vl__num_result;

/* Reads s[0..len), exactly one JSON number token: an integer token into *i (*is_float false),
 * a float token into *f (*is_float true). A float whose magnitude underflows reads as the
 * nearest double (0 or a subnormal), as strtod gives it. */
vl__num_result vl__num_parse(const char *s, size_t len, bool *is_float, int64_t *i, double *f);

/* Decimal digits of v into out (VL__NUM_TEXT_MAX bytes); returns the length. */
size_t vl__num_format_int(int64_t v, char *out);

/* Does text read back to elem? (the caller's element type and reader) */
typedef bool (*vl__reads_back_fn)(const char *text, const void *elem);

/* The fewest significant digits (1..max_digits) of finite v whose "%.*e" text reads back to
 * elem, laid out as Python's repr does (plain for exponents -4..15, else "1.5e+20"); "-0.0"
 * for negative zero. Returns the length written to out (VL__NUM_TEXT_MAX bytes). */
size_t vl__num_format_shortest(double v, int max_digits, vl__reads_back_fn reads_back,
                               const void *elem, char *out);

/* A finite double as a JSON float token: the shortest text that strtod reads back to the same
 * bits, always with a '.' or an exponent ("2.0", never "2"). Returns the length. */
size_t vl__num_format_double(double v, char *out);

/* The text primitives both JSON readers (the streaming one and the tree one) share: the value
 * of four hex digits at s[at..at+4) of s[0..len), -1 when they are not; and code point cp as
 * UTF-8 in out (1 to 4 bytes, returned). */
long vl__json_hex4(const char *s, size_t len, size_t at);
size_t vl__utf8_encode(uint32_t cp, char *out);

#endif
