# SPDX-License-Identifier: GPL-2.0
"""Driver test of shutdown (kexec's path), run by
`fake-daemon.py shutdown SERIES`.

kexec runs device_shutdown() and starts the next kernel without a
machine reset, so the device must be reset by the driver's shutdown
(the virtio core does it by itself only since 6.14): otherwise the new
kernel runs with the device's held set still set, and a migration then
discards memory the new kernel uses.  The guest holds blocks, then
`reboot -f` runs device_shutdown() as kexec does; QEMU runs with
-action reboot=shutdown,shutdown=pause, so no machine reset follows and
query-hugeroom shows the device as the next kernel would find it:
nothing held, driver not ready.
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'tests', 'vm'))
import hrvm  # noqa: E402
import holds_test  # noqa: E402
from holds_test import CHEAPEST, S_OK, evacuate  # noqa: E402


class Shutdown(holds_test.Run):
    def main(self):
        kver, wd, initrd = self.prepare('shutdown')
        return self.run(hrvm.Guest(
            hrvm.qemu_binary(), kver, None, initrd, wd, daemon=self.d,
            mem='1G', extra=('-action', 'reboot=shutdown,shutdown=pause')))

    def hugeroom(self):
        return self.g.qmp('query-hugeroom')[0]

    def body(self):
        g, d = self.g, self.d
        hrvm.wait_for(lambda: d.state and d.state[5], 120, 'DRIVER_OK')
        res, holds, _, _ = self.command(evacuate(3001, 16, flags=CHEAPEST),
                                        3001)
        self.ok(res['status'] == S_OK and res['freed'] == 16,
                'CHEAPEST 16: S_OK, 16 held', str(res))
        self.views_agree('before shutdown')
        info = self.hugeroom()
        self.ok(info['held-blocks'] == 16 and info['driver-ok'],
                'the device holds 16 blocks (%s)' % info['held-blocks'])

        # Whether the kernel resets virtio devices on shutdown by itself
        # (virtio_dev_shutdown(), 6.14 and backports).
        core = g.cmd('sh grep -E " (virtio_dev_shutdown|virtio_pci_shutdown|'
                     'vp_shutdown)$" /proc/kallsyms || true')
        hrvm.log('kernel shutdown hooks: %s' % core)
        # No answer comes: the kernel goes down.
        g.round += 1
        g.sock.sendall(('%d sh reboot -f\n' % g.round).encode())
        hrvm.wait_for(lambda: g.qmp('query-status')['status'] == 'shutdown',
                      120, 'the guest to reboot (QEMU paused)', interval=0.5)
        info = self.hugeroom()
        hrvm.log('after device_shutdown(): %s' % info)
        self.ok(info['held-blocks'] == 0 and not info['driver-ok'],
                'after shutdown the device is reset: %d held, driver-ok %s'
                % (info['held-blocks'], info['driver-ok']))
        self.ok('reboot' in g.console().lower(),
                'the guest console shows the reboot')


def main(series):
    return Shutdown(series).main()
