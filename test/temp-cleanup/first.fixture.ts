import { makesAFolder } from './makes-a-folder.ts';

makesAFolder();
