// s3rver in a process of its own for the pg-s3 suites: in the test's process its request
// handling competed with the test's own clients for one event loop. Prints {"port":N} once it
// listens, and exits when its parent closes stdin (whatever way the parent ends).
import S3rver from 's3rver';
import './s3rver-atomic-puts.mjs';

const directory = process.argv[2];
const s3 = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory });
const { port } = await s3.run();
process.stdout.write(`${JSON.stringify({ port })}\n`);
process.stdin.on('end', () => s3.close().finally(() => process.exit(0)));
process.stdin.resume();
