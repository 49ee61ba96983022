// Preload (`node --import ./loopback-only.mjs …`): every TCP server that is given only a port
// listens on 127.0.0.1 instead of all interfaces. server-everything's streamableHttp mode calls
// `app.listen(PORT)`; the tests run it on loopback only.
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const portOnly = typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0]));
  if (portOnly && typeof args[1] !== 'string') args.splice(1, 0, '127.0.0.1');
  return listen.apply(this, args);
};
