// Independent readers from Python's standard library or PyYAML, used when python3 is present.

import { execFileSync } from 'node:child_process';

/** True when `python3 -c "import <module>"` works here. */
export function pythonHas(module: string): boolean {
  try {
    execFileSync('python3', ['-c', `import ${module}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
