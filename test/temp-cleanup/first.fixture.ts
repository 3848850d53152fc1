import { makesAFolder } from './makes-a-folder.ts';
import { stopsItsRig } from './stops-its-rig.ts';

makesAFolder();
stopsItsRig();
