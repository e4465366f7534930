// The one place that names the test images. scripts/setup-host.sh reads
// BUSYBOX_IMAGE from this file, so keep the `export const X = '...'` form.
import Docker from 'dockerode';

export const REGISTRY = '127.0.0.1:5000';
export const BUSYBOX_IMAGE = '127.0.0.1:5000/svc/busybox:1';

/** True when a Docker engine answers on the default socket. */
export async function dockerAvailable(docker: Docker = new Docker()): Promise<boolean> {
  try {
    await docker.ping();
    return true;
  } catch {
    return false;
  }
}
