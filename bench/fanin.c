/* fanin: N producers -> one consumer; see fanout.c. */
#define FAN_IN 1
#include "fanout.c"
