import module from 'node:module'; module.enableCompileCache?.('/root/.cache/license-server/node-compile-cache');
await import('@oclif/core/command'); 
const t=performance.now(); const m = await import(process.argv[2]); console.log((performance.now()-t).toFixed(1));
