/* placeholder until the CLI lands */
#include <stdio.h>
#include "kiln.h"
int main(void) { printf("kiln %s\n", kiln_version()); return 0; }
