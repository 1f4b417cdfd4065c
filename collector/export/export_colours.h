/* The colours of iotrace-export --slog2's categories, 0xRRGGBB: chosen at
 * build time by gen_colours.py from the families of proto/functions.tsv
 * (docs/export.md, "Colours"), so that each category has one of its own
 * and a function the same one in every file. */
#ifndef IOT_EXPORT_COLOURS_H
#define IOT_EXPORT_COLOURS_H

#include <stdint.h>

/* A function id's state colour; an id this build does not know gets a
 * grey no function has. */
uint32_t xp_colour_func(unsigned func);

/* The arrows to a disk read, a disk write and any other disk operation
 * (XP_DIR_READ, XP_DIR_WRITE, XP_DIR_OTHER): the key colours of the read,
 * write and metadata families, as the calls they come from. */
extern const uint32_t xp_colour_path[3];

/* The time-0 marker. */
extern const uint32_t xp_colour_origin;

#endif
