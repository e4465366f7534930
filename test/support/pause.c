// The whole of a test image with no shell: waits for a signal, as a distroless workload would.
#include <unistd.h>

int main(void) {
  for (;;) pause();
}
